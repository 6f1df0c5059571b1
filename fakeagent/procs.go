package fakeagent

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// liveAgents counts the processes that are running a fake agent against the
// control socket sock, per agent name, by reading /proc: the operating
// system's view, which also sees a process that has not said hello yet. A
// child an agent forks (its MCP bridge, between fork and exec) shows the
// agent's argv for a moment and is not counted.
func liveAgents(sock string) (map[string]int, error) {
	pids, err := livePids(sock)
	out := map[string]int{}
	for agent, ps := range pids {
		out[agent] = len(ps)
	}
	return out, err
}

// livePids lists the pids of the live fake agents against sock, per agent.
func livePids(sock string) (map[string][]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	type match struct {
		agent string
		ppid  string
	}
	found := map[string]match{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue // gone, or a zombie: not a live agent
		}
		agent, ok := agentOf(bytes.Split(bytes.TrimRight(raw, "\x00"), []byte{0}), sock)
		if !ok {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		found[e.Name()] = match{agent, ppidOf(string(stat))}
	}
	out := map[string][]string{}
	for pid, m := range found {
		if _, forked := found[m.ppid]; !forked {
			out[m.agent] = append(out[m.agent], pid)
		}
	}
	return out, nil
}

// LiveProcesses counts the fake agents of agent alive now and the sum of
// their resident memory (VmRSS), read from /proc.
func (c *Controller) LiveProcesses(agent string) (n int, rssKiB int64, err error) {
	pids, err := livePids(c.sock)
	if err != nil {
		return 0, 0, err
	}
	for _, pid := range pids[agent] {
		kib, err := ResidentKiB(pid)
		if err != nil {
			continue // exited since the scan
		}
		n++
		rssKiB += kib
	}
	return n, rssKiB, nil
}

// ResidentKiB reads a process's VmRSS from /proc/PID/status.
func ResidentKiB(pid string) (int64, error) {
	return statusKiB(pid, "VmRSS:")
}

// PeakResidentKiB reads a process's VmHWM (its peak resident memory).
func PeakResidentKiB(pid string) (int64, error) {
	return statusKiB(pid, "VmHWM:")
}

func statusKiB(pid, field string) (int64, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no " + field + " in /proc/" + pid + "/status")
}

// ppidOf reads the parent pid out of /proc/PID/stat ("pid (comm) state ppid …";
// comm may hold spaces and parentheses, so fields count from the last ')').
func ppidOf(stat string) string {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// agentOf reads "--control SOCK --agent NAME" out of an argv.
func agentOf(argv [][]byte, sock string) (string, bool) {
	control, agent := "", ""
	for i := 0; i+1 < len(argv); i++ {
		switch string(argv[i]) {
		case "--control":
			control = string(argv[i+1])
		case "--agent":
			agent = string(argv[i+1])
		}
	}
	return agent, control == sock && agent != ""
}

// countLive samples the live agent processes and raises the peaks; it runs
// at every hello, the moment a new process has just come up.
func (c *Controller) countLive() {
	live, err := liveAgents(c.sock)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.liveErr = err
		return
	}
	total := 0
	for agent, n := range live {
		total += n
		c.peaks[agent] = max(c.peaks[agent], n)
	}
	c.peakAll = max(c.peakAll, total)
}

// PeakProcesses is the most processes of agent seen alive at once, sampled
// by /proc each time one of them started; err says sampling failed.
func (c *Controller) PeakProcesses(agent string) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peaks[agent], c.liveErr
}

// PeakAllProcesses is the most agent processes of any agent seen alive at once.
func (c *Controller) PeakAllProcesses() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peakAll, c.liveErr
}
