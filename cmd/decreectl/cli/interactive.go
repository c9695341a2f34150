package cli

import (
	"context"
	"errors"

	"github.com/decreehq/decree/pkg/interact"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// askInteractive walks a person through a new message (spec 07's
// interactive mode): the routines and the default routine come from the
// controller.
func (g *globals) askInteractive(ctx context.Context, s *session) (*interact.Answers, []*decreev1.Field, error) {
	resp, err := s.client.ListRoutines(ctx, &decreev1.ListRoutinesRequest{})
	if err != nil {
		return nil, nil, describe(err)
	}
	var routines []interact.Routine
	for _, r := range resp.GetRoutines() {
		ir := interact.Routine{Name: r.GetName(), Description: r.GetDescription()}
		for _, p := range r.GetParameters() {
			if !p.GetStandard() {
				ir.Params = append(ir.Params, interact.Param{Name: p.GetName(), Default: p.GetDefaultValue()})
			}
		}
		routines = append(routines, ir)
	}
	opts := interact.Options{Routines: routines, DefaultRoutine: resp.GetDefaultRoutine(), ProjectRoot: s.root, In: g.stdin, Out: g.stdout, Logger: g.log}
	if s.root != "" {
		opts.CheckInputFile = func(p string) error {
			_, err := resolveInputFile(s.root, p)
			return err
		}
	}
	a, err := interact.Ask(ctx, opts)
	if err != nil {
		if errors.Is(err, interact.ErrAborted) {
			return nil, nil, &exitError{code: 130, msg: "cancelled; nothing was queued"}
		}
		return nil, nil, err
	}
	fields := []*decreev1.Field{{Key: "routine", Value: a.Routine}}
	if a.InputFile != "" {
		in := a.InputFile
		if s.root != "" {
			if in, err = resolveInputFile(s.root, a.InputFile); err != nil {
				return nil, nil, &exitError{code: 2, msg: err.Error()}
			}
		}
		fields = append(fields, &decreev1.Field{Key: "input_file", Value: in})
	}
	for _, p := range routines {
		if p.Name != a.Routine {
			continue
		}
		for _, param := range p.Params {
			if v, ok := a.Custom[param.Name]; ok {
				fields = append(fields, &decreev1.Field{Key: param.Name, Value: v})
			}
		}
	}
	return a, fields, nil
}
