package tasks

import (
	"fmt"
	"strings"
	"testing"
)

// TestBroadcastLimit: inputs above the broadcast limit are refused when a kernel task is
// encoded, with a message that says what to do; inputs at the limit pass.
func TestBroadcastLimit(t *testing.T) {
	k, ok := Lookup("kernel")
	if !ok {
		t.Fatal("no kernel kind")
	}
	task := k.Example().(*KernelTask)
	size := int64(8 * len(task.Op.X))
	defer func(old int64) { broadcastLimit = old }(broadcastLimit)
	broadcastLimit = size
	if _, err := k.Encode(task); err != nil {
		t.Errorf("inputs at the limit: %v", err)
	}
	broadcastLimit = size - 1
	_, err := k.Encode(task)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("kernel inputs of %d bytes exceed the broadcast limit", size)) ||
		!strings.Contains(err.Error(), "fewer rows") {
		t.Errorf("inputs over the limit: %v", err)
	}
	if MaxBroadcastBytes > 1<<30/2 {
		t.Errorf("the broadcast limit %d leaves no room in a 1 GiB message", MaxBroadcastBytes)
	}
}
