package worker

import (
	"context"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/decreehq/decree/pkg/driver/plugin"
	"github.com/decreehq/decree/pkg/routine"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// PreCheckOutputLimit is how much of a pre-check's output returns to the
// controller as its reason; the rest still reaches the log.
const PreCheckOutputLimit = 16 << 10

// PreCheckEnv is the variable that asks a routine for its readiness check.
const PreCheckEnv = routine.PreCheckEnv

// runPreCheck runs a routine's readiness check: the routine through its
// driver with DECREE_PRE_CHECK=true, its output both streamed to out and
// returned (the first PreCheckOutputLimit bytes) as Result.Output.
func runPreCheck(ctx context.Context, o ExecOptions, plugins *plugin.Pool, a *decreev1.Assignment, ws string, out io.Writer) (*Result, error) {
	a = proto.Clone(a).(*decreev1.Assignment)
	if a.Env == nil {
		a.Env = map[string]string{}
	}
	a.Env[PreCheckEnv] = "true"
	captured := &limitedBuffer{limit: PreCheckOutputLimit}
	res, err := runRoutine(ctx, o, plugins, a, ws, io.MultiWriter(out, captured))
	if err != nil {
		return nil, err
	}
	res.Output = captured.buf.Bytes()
	return res, nil
}
