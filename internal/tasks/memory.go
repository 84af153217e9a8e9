package tasks

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// machineMemory returns the memory this process may use in bytes: the smaller of the
// physical memory (MemTotal in /proc/meminfo) and the memory limit of its cgroup (v2
// memory.max, else v1 memory.limit_in_bytes), or 0 when the physical memory cannot be read
// (not Linux).
func machineMemory() int64 {
	total := memTotal("/proc/meminfo")
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if lim := cgroupLimit(p); lim > 0 && lim < total {
			total = lim
		}
	}
	return total
}

// memTotal reads MemTotal (in kB) from a meminfo file; 0 when it cannot.
func memTotal(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil || kb <= 0 {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// cgroupLimit reads a cgroup memory limit in bytes; 0 when it cannot or there is none ("max",
// or v1's huge "unlimited" value, which exceeds any physical memory and so never wins).
func cgroupLimit(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil || v <= 0 {
		return 0
	}
	return v
}
