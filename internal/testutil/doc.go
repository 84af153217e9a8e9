// Package testutil holds what several packages' tests share: a logger that writes to t.Log
// and stops at the test's end, a context bounded for a test, and Eventually, the one way tests
// wait on a condition. Only test files import it.
package testutil
