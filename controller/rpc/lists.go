package rpc

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Page sizes of ListMessages and ListRuns.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// pageToken is where the next page starts: after the item with this sort
// key. Listings page by key, not by position, so messages that move between
// the inbox, done/ and dead/ while a client pages are neither skipped nor
// repeated. Filter ties the token to the request that made it.
type pageToken struct {
	Chain  string `json:"c,omitempty"`
	Seq    int    `json:"s,omitempty"`
	Name   string `json:"n,omitempty"`
	NoID   bool   `json:"x,omitempty"`
	Filter string `json:"f,omitempty"`
}

func (p pageToken) encode() string {
	b, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePageToken(s, filter string) (pageToken, error) {
	var p pageToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil {
		return p, status.Errorf(codes.InvalidArgument, "page_token %q is not a token this controller made; pass the next_page_token of the previous page", s)
	}
	if p.Filter != filter {
		return p, status.Error(codes.InvalidArgument, "page_token belongs to a listing with other filters; repeat the filters of the first page")
	}
	return p, nil
}

func pageSize(n int32) (int, error) {
	switch {
	case n < 0:
		return 0, status.Errorf(codes.InvalidArgument, "page_size %d is negative", n)
	case n == 0:
		return defaultPageSize, nil
	case n > maxPageSize:
		return maxPageSize, nil
	}
	return int(n), nil
}

// messageKeyLess orders messages: those with an id first, by chain then
// seq, then by name.
func messageKeyLess(a, b pageToken) bool {
	if a.NoID != b.NoID {
		return !a.NoID
	}
	if a.Chain != b.Chain {
		return a.Chain < b.Chain
	}
	if a.Seq != b.Seq {
		return a.Seq < b.Seq
	}
	return a.Name < b.Name
}

func messageKey(m *decreev1.MessageInfo) pageToken {
	return pageToken{Chain: m.GetChain(), Seq: int(m.GetSeq()), Name: m.GetName(), NoID: m.GetId() == ""}
}

// ListMessages lists messages, oldest chain first and by seq within a
// chain, a page at a time.
func (s *ControllerServer) ListMessages(ctx context.Context, req *decreev1.ListMessagesRequest) (*decreev1.ListMessagesResponse, error) {
	want := map[decreev1.MessageState]bool{}
	for _, st := range req.GetStates() {
		if _, known := decreev1.MessageState_name[int32(st)]; !known || st == decreev1.MessageState_MESSAGE_STATE_UNSPECIFIED {
			return nil, status.Errorf(codes.InvalidArgument, "states: %d is not a message state; use %s", int32(st), acceptedStates())
		}
		want[st] = true
	}
	size, err := pageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	filter := fmt.Sprintf("%v|%s", req.GetStates(), req.GetChain())
	var after *pageToken
	if t := req.GetPageToken(); t != "" {
		p, err := decodePageToken(t, filter)
		if err != nil {
			return nil, err
		}
		after = &p
	}
	all, err := s.messages()
	if err != nil {
		return nil, Status(err)
	}
	sort.SliceStable(all, func(i, j int) bool { return messageKeyLess(messageKey(all[i]), messageKey(all[j])) })
	resp := &decreev1.ListMessagesResponse{}
	for _, m := range all {
		if len(want) > 0 && !want[m.GetState()] || req.GetChain() != "" && m.GetChain() != req.GetChain() {
			continue
		}
		if after != nil && !messageKeyLess(*after, messageKey(m)) {
			continue
		}
		if len(resp.Messages) == size {
			last := messageKey(resp.Messages[size-1])
			last.Filter = filter
			resp.NextPageToken = last.encode()
			break
		}
		resp.Messages = append(resp.Messages, m)
	}
	return resp, nil
}

// acceptedStates lists every state ListMessages filters by, from the enum
// itself: "MESSAGE_STATE_QUEUED (1), ..., MESSAGE_STATE_INTERRUPTED (5)".
func acceptedStates() string {
	var nums []int32
	for n := range decreev1.MessageState_name {
		if n != int32(decreev1.MessageState_MESSAGE_STATE_UNSPECIFIED) {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	parts := make([]string, len(nums))
	for i, n := range nums {
		parts[i] = fmt.Sprintf("%s (%d)", decreev1.MessageState_name[n], n)
	}
	return strings.Join(parts, ", ")
}

// ListRuns lists runs, newest first, a page at a time.
func (s *ControllerServer) ListRuns(ctx context.Context, req *decreev1.ListRunsRequest) (*decreev1.ListRunsResponse, error) {
	size, err := pageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	filter := "runs|" + req.GetChain()
	after := ""
	if t := req.GetPageToken(); t != "" {
		p, err := decodePageToken(t, filter)
		if err != nil {
			return nil, err
		}
		after = p.Name
	}
	// Only this page's runs are read (the store pages from its index of
	// runs/), so listing n runs a page at a time costs O(n), not O(n²).
	runs, more, err := s.d.Store.RunsPage(req.GetChain(), after, size)
	if err != nil {
		return nil, Status(err)
	}
	resp := &decreev1.ListRunsResponse{}
	for _, run := range runs {
		resp.Runs = append(resp.Runs, runInfo(run))
	}
	if more && len(runs) > 0 {
		resp.NextPageToken = pageToken{Name: runs[len(runs)-1].ID(), Filter: filter}.encode()
	}
	return resp, nil
}
