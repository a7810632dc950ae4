package scheduler_test

import (
	"reflect"
	"testing"

	"pacer/scheduler"
)

func TestAdmissionBudgetTake(t *testing.T) {
	for _, tc := range []struct {
		name  string
		b     scheduler.AdmissionBudget
		limit int
		want  int
	}{
		{"RoomOfTheScope", scheduler.AdmissionBudget{Free: 3}, 10, 3},
		{"TheClaimsLimit", scheduler.AdmissionBudget{Free: 30}, 10, 10},
		{"TheLearnedBudget", scheduler.AdmissionBudget{Free: 30, HasBudget: true, Budget: 2}, 10, 2},
		{"ASpentBudget", scheduler.AdmissionBudget{Free: 30, HasBudget: true, Budget: 0}, 10, 0},
		{"ARate", scheduler.AdmissionBudget{Free: 30, SlotMS: 100}, 10, 1},
		{"APacing", scheduler.AdmissionBudget{Free: 30, HasBudget: true, Budget: 5, PacedMS: 50}, 10, 1},
		{"NoRoom", scheduler.AdmissionBudget{Free: -1}, 10, 0},
	} {
		if got := tc.b.Take(tc.limit); got != tc.want {
			t.Errorf("%s: Take(%d) = %d, want %d", tc.name, tc.limit, got, tc.want)
		}
	}
}

// Admit merges a scope's budgets oldest first, bounds each scope by its
// room (one with a rate), and takes one per scope per round.
func TestAdmit(t *testing.T) {
	budgets := []scheduler.AdmissionBudget{
		{Scope: 1, Resource: "", Free: 3},
		{Scope: 2, Resource: "", Free: 10},
		{Scope: 1, Resource: "search", Free: 3},
		{Scope: 3, Resource: "", Free: 10, SlotMS: 100},
	}
	due := []scheduler.DueOperation{
		{ID: 10, NextAttemptAt: 5, Budget: 0}, {ID: 11, NextAttemptAt: 7, Budget: 0}, {ID: 12, NextAttemptAt: 9, Budget: 0},
		{ID: 20, NextAttemptAt: 1, Budget: 1}, {ID: 21, NextAttemptAt: 2, Budget: 1}, {ID: 22, NextAttemptAt: 3, Budget: 1},
		{ID: 13, NextAttemptAt: 6, Budget: 2}, {ID: 14, NextAttemptAt: 6, Budget: 2},
		{ID: 30, NextAttemptAt: 0, Budget: 3}, {ID: 31, NextAttemptAt: 0, Budget: 3},
	}
	ids := func(ds []scheduler.DueOperation) []int64 {
		var out []int64
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return out
	}
	// Scope 1: 10 (5), 13 (6), 14 (6), then its room of 3 is spent; scope
	// 2 all three; scope 3 one (its rate).
	if got, want := ids(scheduler.Admit(budgets, due, 100)), []int64{10, 20, 30, 13, 21, 14, 22}; !reflect.DeepEqual(got, want) {
		t.Errorf("Admit = %v, want %v", got, want)
	}
	if got, want := ids(scheduler.Admit(budgets, due, 4)), []int64{10, 20, 30, 13}; !reflect.DeepEqual(got, want) {
		t.Errorf("Admit with limit 4 = %v, want %v", got, want)
	}
	if got := scheduler.Admit(budgets, nil, 10); len(got) != 0 {
		t.Errorf("Admit of nothing due = %v", got)
	}
}

// Admitted moves a rate-limited scope's slot once however many of its
// budgets admitted, and counts each learned budget's requests and pacing.
func TestAdmitted(t *testing.T) {
	budgets := []scheduler.AdmissionBudget{
		{Scope: 1, Resource: "", SlotMS: 100, NextSlotAt: 50},
		{Scope: 1, Resource: "search", SlotMS: 100, NextSlotAt: 50, HasBudget: true, Budget: 9, BudgetSlotAt: 40, PacedMS: 30},
		{Scope: 2, Resource: "", HasBudget: true, Budget: 9, BudgetSlotAt: 40},
		{Scope: 3, Resource: "", SlotMS: 100, NextSlotAt: 50},
	}
	picked := []scheduler.DueOperation{{ID: 1, Budget: 0}, {ID: 2, Budget: 1}, {ID: 3, Budget: 2}, {ID: 4, Budget: 2}}
	slots, spent := scheduler.Admitted(budgets, picked, 1000)
	if want := []scheduler.RateSlot{{Scope: 1, NextSlotAt: 1100}}; !reflect.DeepEqual(slots, want) {
		t.Errorf("slots %+v, want %+v (scope 3 admitted nothing)", slots, want)
	}
	wantSpent := []scheduler.BudgetSpent{
		{Scope: 1, Resource: "search", Spent: 1, NextSlotAt: 1030},
		{Scope: 2, Resource: "", Spent: 2, NextSlotAt: 40},
	}
	if !reflect.DeepEqual(spent, wantSpent) {
		t.Errorf("spent %+v, want %+v", spent, wantSpent)
	}
	// A slot in the future moves from there, not from now.
	slots, _ = scheduler.Admitted([]scheduler.AdmissionBudget{{Scope: 1, SlotMS: 100, NextSlotAt: 5000}}, picked[:1], 1000)
	if slots[0].NextSlotAt != 5100 {
		t.Errorf("slot moved to %d, want 5100", slots[0].NextSlotAt)
	}
}

func TestRateSpacingAndBudgetPacing(t *testing.T) {
	for _, tc := range []struct{ requests, perMS, want int64 }{{3, 1000, 334}, {1000, 1, 1}, {1, 60000, 60000}} {
		if got := scheduler.RateSpacingMS(tc.requests, tc.perMS); got != tc.want {
			t.Errorf("RateSpacingMS(%d, %d) = %d, want %d (never faster than the rate)", tc.requests, tc.perMS, got, tc.want)
		}
	}
	for _, tc := range []struct{ due, budget, resetAt, now, want int64 }{
		{5, 10, 2000, 1000, 0},    // the budget covers the work
		{11, 10, 2000, 1000, 100}, // spread over the second left
		{11, 10, 1005, 1000, 1},   // at least 1 ms
		{3, 0, 2000, 1000, 0},     // spent: admits nothing, no division
	} {
		if got := scheduler.BudgetPacingMS(tc.due, tc.budget, tc.resetAt, tc.now); got != tc.want {
			t.Errorf("BudgetPacingMS(%d, %d, %d, %d) = %d, want %d", tc.due, tc.budget, tc.resetAt, tc.now, got, tc.want)
		}
	}
}
