package pgstore

import (
	"context"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// One clock decides eligibility (design §10): the database's. Each node
// measures the offset from its own clock to the database's
// clock_timestamp() at every heartbeat (the sample of the shortest round
// trip among the last few, taken at the round trip's middle), and Clock
// gives its claim loop a clock that reads the database's time while
// measuring durations on the local monotonic clock. The claim itself is
// guarded by the database's clock as well (claimGuard): a node whose
// clock runs ahead never claims early, whichever clock it uses.

// offsetSamples is how many recent measurements the offset is chosen
// from.
const offsetSamples = 8

// offsetClock is the measured offset from the local clock to the
// database's. It is safe for concurrent use.
type offsetClock struct {
	mu      sync.Mutex
	samples []offsetSample
	offset  time.Duration
}

// offsetSample is one measurement: the offset and the round trip it was
// taken in.
type offsetSample struct {
	offset, rtt time.Duration
}

// note records one measurement: the database read db between the local
// times before and after.
func (c *offsetClock) note(before, after, db time.Time) {
	rtt := after.Sub(before)
	sample := offsetSample{offset: db.Sub(before.Add(rtt / 2)), rtt: rtt}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples = append(c.samples, sample)
	if len(c.samples) > offsetSamples {
		c.samples = c.samples[1:]
	}
	best := c.samples[0]
	for _, s := range c.samples[1:] {
		if s.rtt < best.rtt {
			best = s
		}
	}
	c.offset = best.offset
}

// get returns the offset (0 before the first measurement).
func (c *offsetClock) get() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// ClockOffset is the measured offset from the store's clock
// (Options.Clock) to the database's: the database's time is the store's
// plus it.
func (s *Store) ClockOffset() time.Duration { return s.node.clock.get() }

// Clock returns a clock that reads the database's time: base's time plus
// the measured offset (ClockOffset), while its timers, deadlines and
// durations run on base. base should be the store's clock (Options.Clock)
// or one that agrees with it. Give it to the scheduler so that its times
// (due times, leases, deadlines) agree with every other node's.
func (s *Store) Clock(base clock.Clock) clock.Clock { return dbClock{base: base, off: &s.node.clock} }

// dbClock is base shifted by a measured offset (Store.Clock).
type dbClock struct {
	base clock.Clock
	off  *offsetClock
}

// Now implements clock.Clock: base's time plus the offset.
func (c dbClock) Now() time.Time { return c.base.Now().Add(c.off.get()) }

// Since implements clock.Clock.
func (c dbClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until implements clock.Clock.
func (c dbClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// WithDeadline implements clock.Clock: d is a time of this clock, reached
// after d-Now on base.
func (c dbClock) WithDeadline(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	return c.base.WithTimeout(parent, c.Until(d))
}

// WithTimeout implements clock.Clock.
func (c dbClock) WithTimeout(parent context.Context, t time.Duration) (context.Context, context.CancelFunc) {
	return c.base.WithTimeout(parent, t)
}

// After implements clock.Clock.
func (c dbClock) After(d time.Duration) <-chan time.Time { return c.base.After(d) }

// AfterFunc implements clock.Clock.
func (c dbClock) AfterFunc(d time.Duration, f func()) *clock.Timer { return c.base.AfterFunc(d, f) }

// Sleep implements clock.Clock.
func (c dbClock) Sleep(d time.Duration) { c.base.Sleep(d) }

// Tick implements clock.Clock.
func (c dbClock) Tick(d time.Duration) <-chan time.Time { return c.base.Tick(d) }

// Ticker implements clock.Clock.
func (c dbClock) Ticker(d time.Duration) *clock.Ticker { return c.base.Ticker(d) }

// Timer implements clock.Clock.
func (c dbClock) Timer(d time.Duration) *clock.Timer { return c.base.Timer(d) }
