package db_test

import (
	"testing"

	"pacer/internal/pacertest"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// The SQLite store keeps the whole scheduler.Store contract.
func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) scheduler.Store { return pacertest.OpenStore(t) })
}
