package scheduler

import (
	"cmp"
	"slices"
)

// How a claim chooses what to lease, the same for every store. The store
// reads, in the claim's transaction, the budgets that may admit at now
// (AdmissionBudget, oldest due work first) and, for each, up to Take of
// its oldest due operations; Admit picks from them; the store leases the
// picked operations and writes what Admitted says about the slots and
// budgets they spent. Times are milliseconds since the epoch, as the
// stores keep them.

// AdmissionBudget is one budget (a scope's learned budget of a resource,
// or its default one) a claim may admit from.
type AdmissionBudget struct {
	Scope    int64 // the scope's row ID
	Resource string
	// Free is the scope's concurrency slots left.
	Free int
	// SlotMS is the spacing of the scope's configured rate (RateSpacingMS),
	// 0 without one; NextSlotAt is the scope's rate slot.
	SlotMS, NextSlotAt int64
	// HasBudget tells whether a learned budget applies until its reset:
	// Budget is what is left of it above the reserve, BudgetSlotAt its
	// pacing slot, PacedMS the spacing that spreads it over the time left
	// (BudgetPacingMS; 0 when it covers the work due).
	HasBudget             bool
	Budget                int64
	BudgetSlotAt, PacedMS int64
}

// Take is how many of b's due operations a claim of limit may lease: as
// many as the scope has room for and the budget covers, one when a rate
// or a pacing spaces them.
func (b AdmissionBudget) Take(limit int) int {
	n := min(b.Free, limit)
	if b.HasBudget {
		n = min(n, int(min(b.Budget, int64(limit))))
	}
	if b.SlotMS > 0 || b.PacedMS > 0 {
		n = 1
	}
	return max(n, 0)
}

// DueOperation is one due operation a store read for a budget: its row
// ID, next attempt time, the time it became eligible (its own, or its
// scope's ready time when later), and the index of its budget.
type DueOperation struct {
	ID, NextAttemptAt, Eligible int64
	Budget                      int
}

// Admit picks up to limit of due (each budget's, Budget set): each scope's
// operations merged oldest first across its budgets, as many as the
// scope has room for (one when its rate spaces them), then one per scope
// per round, scopes in the order of their first budget, so that one
// scope's backlog does not starve another.
func Admit(budgets []AdmissionBudget, due []DueOperation, limit int) []DueOperation {
	var (
		order  []int64 // scopes, in admission order
		queues = map[int64][]DueOperation{}
		free   = map[int64]int{}
	)
	for _, b := range budgets {
		if _, seen := free[b.Scope]; seen {
			continue
		}
		order = append(order, b.Scope)
		free[b.Scope] = b.Free
		if b.SlotMS > 0 {
			free[b.Scope] = 1
		}
	}
	for _, d := range due {
		s := budgets[d.Budget].Scope
		queues[s] = append(queues[s], d)
	}
	for _, s := range order {
		q := queues[s]
		slices.SortStableFunc(q, func(a, b DueOperation) int {
			if c := cmp.Compare(a.NextAttemptAt, b.NextAttemptAt); c != 0 {
				return c
			}
			return cmp.Compare(a.ID, b.ID)
		})
		queues[s] = q[:min(len(q), max(free[s], 0))]
	}
	var picked []DueOperation
	for round := 0; len(picked) < limit; round++ {
		took := false
		for _, s := range order {
			if q := queues[s]; round < len(q) && len(picked) < limit {
				picked = append(picked, q[round])
				took = true
			}
		}
		if !took {
			break
		}
	}
	return picked
}

// RateSlot is a scope's configured rate slot moved by a claim.
type RateSlot struct {
	Scope      int64
	NextSlotAt int64
}

// BudgetSpent is a learned budget a claim spent: Spent requests now in
// flight count against it until the provider's next answer says
// otherwise, and its pacing slot moves to NextSlotAt.
type BudgetSpent struct {
	Scope      int64
	Resource   string
	Spent      int64
	NextSlotAt int64
}

// Admitted is what the picked operations spend at now: each rate-limited
// scope's slot moved once, and each learned budget's count and pacing.
func Admitted(budgets []AdmissionBudget, picked []DueOperation, now int64) ([]RateSlot, []BudgetSpent) {
	taken := make([]int64, len(budgets))
	for _, d := range picked {
		taken[d.Budget]++
	}
	var slots []RateSlot
	var spent []BudgetSpent
	moved := map[int64]bool{}
	for i, b := range budgets {
		if taken[i] == 0 {
			continue
		}
		if b.SlotMS > 0 && !moved[b.Scope] {
			moved[b.Scope] = true
			slots = append(slots, RateSlot{Scope: b.Scope, NextSlotAt: max(b.NextSlotAt, now) + b.SlotMS})
		}
		if b.HasBudget {
			next := b.BudgetSlotAt
			if b.PacedMS > 0 {
				next = max(b.BudgetSlotAt, now) + b.PacedMS
			}
			spent = append(spent, BudgetSpent{Scope: b.Scope, Resource: b.Resource, Spent: taken[i], NextSlotAt: next})
		}
	}
	return slots, spent
}

// RateSpacingMS is the spacing of requests per perMS milliseconds:
// rounded up, so never faster than the rate, and at least 1 ms.
func RateSpacingMS(requests, perMS int64) int64 {
	return max((perMS+requests-1)/requests, 1)
}

// BudgetPacingMS is the spacing that spreads budget requests over the
// time left until resetAt, when more work is due before the reset (due)
// than the budget covers; 0 when it covers the work, which may go at
// once (and for a spent budget, which admits nothing). A store counts
// due up to budget+1.
func BudgetPacingMS(due, budget, resetAt, now int64) int64 {
	if due <= budget || budget <= 0 {
		return 0
	}
	return max((resetAt-now)/budget, 1)
}
