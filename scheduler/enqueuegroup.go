package scheduler

import (
	"context"
	"fmt"
	"time"
)

// maxEnqueueGroup bounds the operations of one group-committed enqueue
// transaction, so that it stays short: a few milliseconds of the single
// writer. A batch larger than this commits alone.
const maxEnqueueGroup = 256

// enqueueCall is one Service.Enqueue call's validated operations and the
// time it read.
type enqueueCall struct {
	ops []NewOperation
	now time.Time
}

// newEnqueueGroup returns the group commit of Service.Enqueue: concurrent
// calls (single enqueues and batches, each whole) share one
// Store.Enqueue transaction of up to maxEnqueueGroup operations, in
// arrival order, and each gets the results of its own operations. A
// batch keeps its meaning, one transaction for all of its operations: its
// group's, or its own when the group's fails (see groupCommit).
//
// The group's transaction is given the earliest of its calls' times: each
// call's operations are created no later than the time it validated them
// against (and their notBefore, never before that time), and a request
// identity is judged held at least as long as alone. The calls' times lie
// within the group's wait, microseconds to milliseconds apart.
func newEnqueueGroup(store Store) *groupCommit[enqueueCall, []EnqueueResult] {
	commit := func(ctx context.Context, calls []enqueueCall) ([][]EnqueueResult, error) {
		if len(calls) == 1 {
			res, err := store.Enqueue(ctx, calls[0].ops, calls[0].now)
			if err != nil {
				return nil, err
			}
			return [][]EnqueueResult{res}, nil
		}
		var ops []NewOperation
		now := calls[0].now
		for _, c := range calls {
			ops = append(ops, c.ops...)
			if c.now.Before(now) {
				now = c.now
			}
		}
		res, err := store.Enqueue(ctx, ops, now)
		if err != nil {
			return nil, err
		}
		if len(res) != len(ops) {
			return nil, fmt.Errorf("enqueue: %d results for %d operations", len(res), len(ops))
		}
		out := make([][]EnqueueResult, len(calls))
		for i, c := range calls {
			out[i], res = res[:len(c.ops):len(c.ops)], res[len(c.ops):]
		}
		return out, nil
	}
	return newGroupCommit(commit, func(c enqueueCall) int { return len(c.ops) }, maxEnqueueGroup)
}
