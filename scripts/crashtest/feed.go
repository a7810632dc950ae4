package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// The change feed as an application follows it (GET /v1/changes, design
// §7): from the start, each page after the last one's next, long-polled,
// through each process in turn, across kills and restarts.

// feedChange is one change as the feed showed it.
type feedChange struct {
	Seq         int64
	OperationID string
	State       string
}

// feedLog is what one follower read, in the order it read it.
type feedLog struct {
	changes []feedChange
	pages   []int // pages answered by each slot
}

// feedWait is the long-poll wait of one page.
const feedWait = time.Second

// follow reads the change feed until stop is closed and then two pages in
// a row come back empty (everything committed before stop was read), or
// ctx ends. Each page is asked of the next process; one that cannot be
// reached, or cannot read its database, is asked again later.
func follow(ctx context.Context, f *fleet, stop <-chan struct{}) (*feedLog, error) {
	log := &feedLog{pages: make([]int, f.size())}
	var after int64
	empty, stopped := 0, false
	for i := 0; ; i++ {
		if !stopped {
			select {
			case <-stop:
				stopped, empty = true, 0
			default:
			}
		}
		if stopped && empty >= 2 {
			return log, nil
		}
		if ctx.Err() != nil {
			return log, fmt.Errorf("change feed: %w", ctx.Err())
		}
		slot := i % f.size()
		st, out, err := f.procs[slot].call(ctx, "GET", "/v1/changes?limit=1000&wait="+feedWait.String()+"&after="+strconv.FormatInt(after, 10), nil)
		if err != nil || st >= 500 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if st != 200 {
			return log, fmt.Errorf("change feed after %d: %d %s", after, st, out)
		}
		var page struct {
			Changes []feedChange
			Next    int64
		}
		if err := json.Unmarshal(out, &page); err != nil {
			return log, fmt.Errorf("change feed after %d: %w (%s)", after, err, out)
		}
		log.pages[slot]++
		log.changes = append(log.changes, page.Changes...)
		if len(page.Changes) == 0 {
			empty++
		} else {
			empty = 0
		}
		after = page.Next
	}
}
