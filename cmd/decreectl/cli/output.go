package cli

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// printJSON writes a response as indented protojson.
func (g *globals) printJSON(m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", EmitUnpopulated: false}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(g.stdout, string(b))
	return err
}

// table starts an aligned table on stdout.
func (g *globals) table(header ...string) *tabwriter.Writer {
	w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(header, "\t"))
	return w
}

func row(w *tabwriter.Writer, cols ...any) {
	s := make([]string, len(cols))
	for i, c := range cols {
		s[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(w, strings.Join(s, "\t"))
}

func when(ts *timestamppb.Timestamp) string {
	if ts == nil || !ts.IsValid() || ts.AsTime().IsZero() {
		return "-"
	}
	return ts.AsTime().Local().Format(time.DateTime)
}

// describe turns a gRPC error into a message for people, listing the
// violations a FAILED_PRECONDITION carries (e.g. paths that block a revert).
func describe(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	var b strings.Builder
	b.WriteString(st.Message())
	switch st.Code() {
	case codes.Unauthenticated:
		b.WriteString("\n  decreectl sends the token given with --token-file FILE, else $DECREE_TOKEN_FILE, else $DECREE_TOKEN")
	case codes.PermissionDenied:
		b.WriteString("\n  decreectl needs the controller's client token (its --client-token-file), not the worker token")
	}
	for _, d := range st.Details() {
		if pf, ok := d.(*errdetails.PreconditionFailure); ok {
			for _, v := range pf.GetViolations() {
				fmt.Fprintf(&b, "\n  %s: %s", v.GetSubject(), v.GetDescription())
			}
		}
	}
	return errors.New(b.String())
}
