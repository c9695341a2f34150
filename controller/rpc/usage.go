package rpc

import (
	"github.com/decreehq/decree/pkg/usage"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// usageProto converts usage totals to the API's Usage (nil for none).
func usageProto(t *usage.Totals) *decreev1.Usage {
	if t == nil {
		return nil
	}
	return &decreev1.Usage{
		CostUsd: t.CostUSD.Float(), EstimatedCostUsd: t.EstimatedUSD.Float(),
		InputTokens: t.InputTokens, OutputTokens: t.OutputTokens,
		CacheReadTokens: t.CacheReadTokens, CacheWriteTokens: t.CacheWriteTokens,
		Calls: int32(t.Calls), UnpricedCalls: int32(t.Unpriced), MalformedLines: int32(t.Malformed),
	}
}
