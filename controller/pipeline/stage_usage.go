package pipeline

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/decreehq/decree/controller/logbook"
	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/usage"
)

// The usage stage: what AI calls cost, budgets, and per-attempt values.
//
// Every attempt gets DECREE_USAGE_FILE, usage.try-NNN.jsonl in the run
// directory (package usage): an in-place worker's routine writes it
// there directly, a replica worker returns it with the other run files.
// After every attempt the stage sums the usage files of all attempts so
// far, in order (Claude's running totals are counted by increments across
// attempts, so a session resumed by a retry is not counted twice), and
// records the totals per attempt and for the message in state.json, and
// so in run.json. Malformed lines are skipped with a warning in the
// attempt's routine log.
//
// Budget: the lower of the message's max_cost_usd (frontmatter) and its
// routine's (config.yml). Each attempt gets what is left as
// DECREE_BUDGET_USD. While an in-place attempt runs, the stage watches
// its usage file and stops the attempt as soon as the message's total
// goes over; after any attempt (also a successful one, or one on a
// replica worker that could not be watched) a total over the budget ends
// the attempt failed and over budget: the state machine then reverts the
// tree and dead-letters the message (BudgetExceeded), with no further
// attempt.
//
// Escalation: a routine's attempts list (config.yml) gives attempt N
// DECREE_ATTEMPT_VALUE (the Nth entry, counting attempts that count: a
// retry after a usage limit gets the same value again; the last entry
// for attempts beyond the list) and DECREE_ATTEMPT_VALUES (all entries,
// comma-separated). Every attempt gets DECREE_FINAL_ATTEMPT (true on the
// last one).

// Environment variables the stage sets.
const (
	budgetEnv        = "DECREE_BUDGET_USD"
	attemptValueEnv  = "DECREE_ATTEMPT_VALUE"
	attemptValuesEnv = "DECREE_ATTEMPT_VALUES"
	finalAttemptEnv  = "DECREE_FINAL_ATTEMPT"
)

// usageWatchInterval is how often a running attempt's usage file is read
// when a budget applies.
const usageWatchInterval = 250 * time.Millisecond

// usageStage is the stage; its parts are functions so that it can be
// tested without a whole loop.
type usageStage struct {
	// read reads the usage file of attempt n.
	read func(m *msg, n int) (recs []usage.Record, malformed int, warnings []string, err error)
	// note appends lines to attempt n's routine log.
	note func(m *msg, n int, text string)
	// save records the totals in state.json.
	save func(m *msg, per []usage.Totals, total usage.Totals, budget float64) error
	// warn reports a problem to clients.
	warn  func(ctx context.Context, id, text string)
	every time.Duration
}

// budgetOf returns the message's budget in micro-dollars (0: none).
func budgetOf(m *msg) (usage.Dollars, error) {
	var budget float64
	if m.cfg != nil && m.rt.Name != "" {
		budget = m.cfg.RoutineBudget(m.rt.Name)
	}
	if m.e.Message != nil {
		if s := strings.TrimSpace(m.e.Message.GetString("max_cost_usd")); s != "" {
			f, err := parseBudget(s)
			if err != nil {
				return 0, fmt.Errorf("%v in the frontmatter of %s", err, m.e.File)
			}
			if budget == 0 || f < budget {
				budget = f
			}
		}
	}
	return usage.FromFloat(budget), nil
}

// parseBudget reads a max_cost_usd value: US dollars above 0.
func parseBudget(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimPrefix(strings.TrimSpace(s), "$"), 64)
	if err != nil || f <= 0 || f > 1e9 {
		return 0, fmt.Errorf("max_cost_usd %q is not an amount of US dollars above 0 (such as 2.50); fix or remove it", s)
	}
	return f, nil
}

// totals sums the usage files of attempts 1..upto: per attempt and in
// all, with the warnings of attempt upto.
func (s *usageStage) totals(m *msg, upto int) (per []usage.Totals, total usage.Totals, warns []string) {
	prices := usage.DefaultPrices()
	if m.cfg != nil {
		prices = m.cfg.PriceTable()
	}
	sum := usage.NewSum(prices)
	for k := 1; k <= upto; k++ {
		recs, bad, w, err := s.read(m, k)
		if err != nil {
			w = append(w, err.Error())
		}
		t := sum.Lines(recs, bad)
		per = append(per, t)
		total.Add(t)
		if k == upto {
			warns = w
		}
	}
	return per, total, warns
}

// before refuses a message whose own budget cannot be read.
func (s *usageStage) before(_ context.Context, m *msg, _ int) error {
	_, err := budgetOf(m)
	return err
}

// after records the totals and marks an attempt that ended over budget.
func (s *usageStage) after(ctx context.Context, m *msg, n int, end *attemptEnd) {
	per, total, warns := s.totals(m, n)
	if len(warns) > 0 {
		text := ""
		for _, w := range warns {
			text += "decree: " + w + "\n"
		}
		if bad := per[n-1].Malformed; bad > len(warns) {
			text += fmt.Sprintf("decree: %d malformed usage line(s) skipped in all\n", bad)
		}
		s.note(m, n, text)
	}
	budget, _ := budgetOf(m)
	if err := s.save(m, per, total, budget.Float()); err != nil {
		s.warn(ctx, m.e.ID, fmt.Sprintf("record the usage of attempt %d: %v", n, err))
	}
	if budget > 0 && total.CostUSD > budget {
		end.res.OverBudget, end.res.OK = true, false
		if end.errText == "" {
			end.errText = overBudgetText(total.CostUSD, budget)
		}
	}
}

func overBudgetText(spent, budget usage.Dollars) string {
	return fmt.Sprintf("over budget: the message's AI calls cost %s, more than its max_cost_usd of %s", spent, budget)
}

// env adds attempt n's usage file, remaining budget and attempt values.
func (s *usageStage) env(m *msg, n, max int, env map[string]string) {
	env[usage.FileEnv] = path.Join(layout.Dir, layout.Runs, m.e.ID, usage.FileName(n))
	env[finalAttemptEnv] = strconv.FormatBool(n >= max)
	if budget, err := budgetOf(m); err == nil && budget > 0 {
		_, spent, _ := s.totals(m, n-1)
		left := max64(budget-spent.CostUSD, 0)
		env[budgetEnv] = strconv.FormatFloat(left.Float(), 'f', -1, 64)
	}
	if m.cfg == nil {
		return
	}
	if values := m.cfg.AttemptValuesFor(m.rt.Name); len(values) > 0 {
		env[attemptValueEnv] = attemptValue(values, n-m.run.Machine().Waits)
		env[attemptValuesEnv] = strings.Join(values, ",")
	}
}

// attemptValue is the value of counted attempt k (1-based): the last one
// beyond the list.
func attemptValue(values []string, k int) string {
	k = min(max(k, 1), len(values))
	return values[k-1]
}

func max64(a, b usage.Dollars) usage.Dollars {
	if a > b {
		return a
	}
	return b
}

// watch stops an in-place attempt whose message goes over budget while it
// runs: it returns the context to dispatch with and a function that ends
// the watch and says why the attempt was stopped ("" when it was not).
func (s *usageStage) watch(ctx context.Context, m *msg, n int, inPlace bool) (context.Context, func() string) {
	budget, err := budgetOf(m)
	if !inPlace || err != nil || budget == 0 {
		return ctx, func() string { return "" }
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var why string
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(s.every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-wctx.Done():
				return
			case <-t.C:
			}
			if _, total, _ := s.totals(m, n); total.CostUSD > budget {
				why = "stopped " + overBudgetText(total.CostUSD, budget)
				cancel()
				return
			}
		}
	}()
	return wctx, func() string {
		close(done)
		wg.Wait()
		cancel()
		return why
	}
}

var _ attemptStage = (*usageStage)(nil)

// newUsageStage wires the stage to the loop.
func (p *Pipeline) newUsageStage() *usageStage {
	return &usageStage{
		read: func(m *msg, n int) ([]usage.Record, int, []string, error) {
			fp, err := m.run.Path(usage.FileName(n))
			if err != nil {
				return nil, 0, nil, err
			}
			recs, bad, warns, err := usage.ReadFile(fp)
			if n == 1 && err == nil {
				// The routing calls made for the message count with its
				// first attempt (router_usage.go).
				if rp, perr := m.run.Path(RouterUsageFile); perr == nil {
					if rr, rbad, rwarns, rerr := usage.ReadFile(rp); rerr == nil {
						recs, bad, warns = append(rr, recs...), bad+rbad, append(rwarns, warns...)
					}
				}
			}
			return recs, bad, warns, err
		},
		note: func(m *msg, n int, text string) {
			k := logbook.Key{MessageID: m.e.ID, Attempt: n, Stream: "routine"}
			if size, err := p.d.Logs.Size(k); err == nil {
				_, _ = p.d.Logs.Append(k, size, []byte(text))
			}
		},
		save: func(m *msg, per []usage.Totals, total usage.Totals, budget float64) error {
			return m.run.SetUsage(per, total, budget)
		},
		warn:  p.warn,
		every: usageWatchInterval,
	}
}

// costs returns the loop's usage stage.
func (p *Pipeline) costs() *usageStage {
	for _, s := range p.stages {
		if u, ok := s.(*usageStage); ok {
			return u
		}
	}
	return p.newUsageStage()
}

// settleUsage sums the usage files of every attempt of m again before it
// is filed (an attempt lost with the controller never reached the stage).
func (p *Pipeline) settleUsage(m *msg) {
	st := m.run.State()
	if len(st.Attempts) == 0 {
		return
	}
	s := p.costs()
	per, total, _ := s.totals(m, len(st.Attempts))
	budget := st.MaxCostUSD
	if b, err := budgetOf(m); err == nil && m.rt.Name != "" {
		budget = b.Float()
	}
	if err := m.run.SetUsage(per, total, budget); err != nil {
		p.log.Error("record usage", "message", m.e.ID, "err", err)
	}
}

// overBudget reverts and dead-letters a message whose cost went over its
// budget (msgstate.StepBudget).
func (p *Pipeline) overBudget(ctx context.Context, m *msg) error {
	return p.revertAndKill(ctx, m, msgstate.ForBudget, msgstate.BudgetExceeded)
}

// budgetNote is the dead-letter note's detail for BudgetExceeded.
func budgetNote(id string, s store.RunState) string {
	spent := usage.Dollars(0)
	if s.Usage != nil {
		spent = s.Usage.CostUSD
	}
	return fmt.Sprintf("The message's AI calls cost %s, more than its budget of %s (max_cost_usd of the message or its routine), after %d attempt(s); no further attempt was made and the tree was reverted to the checkpoint. Costs per attempt are in .decree/runs/%s/run.json (usage) and its usage.try-NNN.jsonl files. Raise the budget, then requeue the message to run it again.\n\n%s",
		spent, usage.FromFloat(s.MaxCostUSD), len(s.Attempts), id, attemptSummary(s))
}

// RunningUsage returns what the running message's AI calls cost so far,
// the attempt under way included.
func (p *Pipeline) RunningUsage() (usage.Totals, bool) {
	p.mu.Lock()
	id, n := "", 0
	if r := p.firstRunningLocked(); r != nil {
		id, n = r.id, r.attempt
	}
	p.mu.Unlock()
	if n == 0 {
		return usage.Totals{}, false
	}
	run, err := p.d.Store.OpenRun(id)
	if err != nil {
		return usage.Totals{}, false
	}
	var cfg *config.Config
	if p.d.Config != nil {
		cfg, _ = p.d.Config()
	}
	_, total, _ := p.costs().totals(&msg{run: run, cfg: cfg}, n)
	return total, true
}
