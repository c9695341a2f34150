package controller

import (
	"context"

	"github.com/decreehq/decree/controller/crontab"
	"github.com/decreehq/decree/controller/events"
)

// openCron prepares the scheduler of .decree/cron/. Every controller has
// one, so ListCronEntries answers; only a daemon runs it (runCron).
func (c *Controller) openCron() error {
	s, err := crontab.New(crontab.Options{
		Store: c.store, Config: c.config, Logger: c.log, Wake: c.pipe.Wake,
		Emit: func(ev *events.Event) {
			if _, err := c.events.Append(ev); err != nil {
				c.log.Error("append event", "kind", ev.Kind, "err", err)
			}
		},
	})
	if err != nil {
		return err
	}
	c.cron = s
	return nil
}

// runCron fires cron files until ctx ends when the controller is a daemon
// that processes messages; the returned channel closes when it stopped.
func (c *Controller) runCron(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if !c.opts.Daemon || c.opts.NoProcessing {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		c.cron.Run(ctx, c.opts.Poll)
	}()
	return done
}
