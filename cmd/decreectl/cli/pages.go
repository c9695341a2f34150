package cli

import (
	"context"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// listRuns fetches runs page by page, newest first, up to limit (all when
// limit <= 0), as one response.
func listRuns(ctx context.Context, c decreev1.ControllerServiceClient, chain string, limit int) (*decreev1.ListRunsResponse, error) {
	out := &decreev1.ListRunsResponse{}
	// The largest pages the API gives: fewer round trips for long listings.
	req := &decreev1.ListRunsRequest{Chain: chain, PageSize: 1000}
	for {
		if limit > 0 {
			req.PageSize = int32(min(limit-len(out.Runs), 1000))
		}
		resp, err := c.ListRuns(ctx, req)
		if err != nil {
			return nil, err
		}
		out.Runs = append(out.Runs, resp.GetRuns()...)
		if resp.GetNextPageToken() == "" || (limit > 0 && len(out.Runs) >= limit) {
			return out, nil
		}
		req.PageToken = resp.GetNextPageToken()
	}
}
