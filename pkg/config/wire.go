package config

import (
	"maps"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// Proto returns the tree settings as carried by assignments and driver
// requests (decree.v1.TreeSettings).
func (t TreeSettings) Proto() *decreev1.TreeSettings {
	return &decreev1.TreeSettings{
		DefaultCli:  t.DefaultCLI,
		ValidateCli: t.ValidateCLI,
		RetryCli:    t.RetryCLI,
		RetryCount:  int32(t.RetryCount),
		TimeoutS:    int32(t.TimeoutS),
		Clis:        maps.Clone(t.CLIs),
	}
}

// TreeSettingsFromProto is the inverse of TreeSettings.Proto. A nil message
// (an older controller, or a caller that sent none) yields the defaults.
func TreeSettingsFromProto(p *decreev1.TreeSettings) TreeSettings {
	if p == nil {
		return Default().Tree
	}
	t := TreeSettings{
		DefaultCLI:  p.GetDefaultCli(),
		ValidateCLI: p.GetValidateCli(),
		RetryCLI:    p.GetRetryCli(),
		RetryCount:  int(p.GetRetryCount()),
		TimeoutS:    int(p.GetTimeoutS()),
		CLIs:        maps.Clone(p.GetClis()),
	}
	if t.CLIs == nil {
		t.CLIs = map[string]string{}
	}
	return t
}
