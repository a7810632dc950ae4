package db

import "strings"

// Statements over many rows at once. A statement's own cost in SQLite
// (through modernc.org/sqlite: binding, stepping, resetting, its mutexes)
// is about as much as the rows it writes, so the hot path writes a
// transaction's rows of one kind in a few statements, each over a list of
// rows given as parameters. Each list is cut into chunks of valuesChunk's
// sizes, so that each such statement has at most three texts to prepare.

// valuesChunk is the size of the next chunk when n rows are left: 32, 8
// or 1.
func valuesChunk(n int) int {
	switch {
	case n >= 32:
		return 32
	case n >= 8:
		return 8
	}
	return 1
}

// valuesList is "WITH name AS (VALUES (?, …), …)": rows rows of cols
// parameters each, to be followed by the statement that reads name.
func valuesList(name string, cols, rows int) string {
	return "WITH " + name + " AS (" + valuesRows(cols, rows, "") + ")"
}

// valuesRows is "VALUES (?, …, extra), …": rows rows of cols parameters
// each, then extra when not empty.
func valuesRows(cols, rows int, extra string) string {
	row := "(" + strings.Repeat("?, ", cols-1) + "?"
	if extra != "" {
		row += ", " + extra
	}
	row += ")"
	return "VALUES " + strings.Repeat(row+", ", rows-1) + row
}
