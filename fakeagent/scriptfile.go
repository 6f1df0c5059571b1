package fakeagent

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// A script file scripts fake-agents run by hand (`zooid fake-agent --agent
// NAME --script FILE`), in the wording of the features' "Scripting agents"
// steps: one turn per line, queued in order, then DefaultReply for every
// later prompt. Blank lines and lines starting with # are skipped:
//
//	coder will reply "on it"
//	coder will reply "checking the logs now" in 4 chunks
//	coder will reply "svc-a is clean" after 0.5 seconds
//	coder will call zooid_get_recent_threads with {"limit": 5}
//	coder will list its tools
//	coder will crash
//	coder will take a turn that:
//	  | says  | looking                       |
//	  | calls | zooid_get_history with {"limit": 3} |
//	  | waits | 1.5s                          |
//
// Tool arguments are JSON as written: the features' placeholders ({#ops},
// {thread}) mean nothing here; write the room's id or alias instead.
var scriptLines = []struct {
	re   *regexp.Regexp
	turn func(m []string) (Turn, error)
}{
	{regexp.MustCompile(`^([a-z0-9-]+) will reply "([^"]*)"$`), func(m []string) (Turn, error) {
		return Turn{Say(m[2]), Stop(acp.StopReasonEndTurn)}, nil
	}},
	{regexp.MustCompile(`^([a-z0-9-]+) will reply "([^"]*)" in (\d+) chunks$`), func(m []string) (Turn, error) {
		k, _ := strconv.Atoi(m[3])
		return Turn{SayInChunks(SplitChunks(m[2], k)...), Stop(acp.StopReasonEndTurn)}, nil
	}},
	{regexp.MustCompile(`^([a-z0-9-]+) will reply "([^"]*)" after (\d+(?:\.\d+)?) seconds?$`), func(m []string) (Turn, error) {
		f, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, fmt.Errorf("seconds %q: %w", m[3], err)
		}
		return Turn{Wait(time.Duration(f * float64(time.Second))), Say(m[2]), Stop(acp.StopReasonEndTurn)}, nil
	}},
	{regexp.MustCompile(`^([a-z0-9-]+) will call (zooid_[a-z_]+)(?: with (\{.*\}))?$`), func(m []string) (Turn, error) {
		args, err := JSONArgs(m[3])
		if err != nil {
			return nil, err
		}
		return Turn{CallTool(m[2], args), Stop(acp.StopReasonEndTurn)}, nil
	}},
	{regexp.MustCompile(`^([a-z0-9-]+) will (crash|hang)$`), func(m []string) (Turn, error) {
		return FailTurn(m[2]), nil
	}},
	{regexp.MustCompile(`^([a-z0-9-]+) will list its tools$`), func(m []string) (Turn, error) {
		return Turn{ListTools(), Stop(acp.StopReasonEndTurn)}, nil
	}},
}

// tableHead opens a turn written as table rows, as the feature step
// "AGENT will take a turn that:" does.
var tableHead = regexp.MustCompile(`^([a-z0-9-]+) will take a turn that:$`)

// ParseScript reads a script file (see scriptLines) and returns each agent's
// turns in order. name is the file's name for errors, which say name:line.
func ParseScript(r io.Reader, name string) (map[string][]Turn, error) {
	out := map[string][]Turn{}
	sc := bufio.NewScanner(r)
	n := 0
	var table *struct {
		agent string
		line  int
		rows  [][]string
	}
	endTable := func() error {
		if table == nil {
			return nil
		}
		if len(table.rows) == 0 {
			return fmt.Errorf("%s:%d: %q takes rows of | action | argument | below it", name, table.line, "will take a turn that:")
		}
		turn, err := TurnFromRows(table.rows, JSONArgs)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", name, table.line, err)
		}
		for _, a := range turn {
			if a.UntilReleased {
				return fmt.Errorf("%s:%d: | waits until | released | waits for a feature's step to release it, and nothing releases an agent run by hand: use | waits | 2s |", name, table.line)
			}
		}
		out[table.agent] = append(out[table.agent], turn)
		table = nil
		return nil
	}
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if table != nil && strings.HasPrefix(line, "|") {
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			table.rows = append(table.rows, cells)
			continue
		}
		if err := endTable(); err != nil {
			return nil, err
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if m := tableHead.FindStringSubmatch(line); m != nil {
			table = &struct {
				agent string
				line  int
				rows  [][]string
			}{agent: m[1], line: n}
			continue
		}
		matched := false
		for _, l := range scriptLines {
			m := l.re.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			turn, err := l.turn(m)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, n, err)
			}
			out[m[1]] = append(out[m[1]], turn)
			matched = true
			break
		}
		if !matched {
			return nil, fmt.Errorf("%s:%d: %q is not a script line; write one turn per line in the features' wording, such as `coder will reply \"on it\"` or `coder will call zooid_get_history with {\"limit\": 5}`", name, n, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if err := endTable(); err != nil {
		return nil, err
	}
	return out, nil
}

// JSONArgs reads a tool call's arguments: a JSON object, or nothing for none.
func JSONArgs(js string) (map[string]any, error) {
	args := map[string]any{}
	if strings.TrimSpace(js) == "" {
		return args, nil
	}
	if err := json.Unmarshal([]byte(js), &args); err != nil {
		return nil, fmt.Errorf("tool arguments %s are not a JSON object: %w", js, err)
	}
	return args, nil
}

// SplitChunks cuts text into k pieces of about equal length, never inside a
// character.
func SplitChunks(text string, k int) []string {
	rs := []rune(text)
	k = max(1, min(k, len(rs)))
	var out []string
	for i := range k {
		out = append(out, string(rs[i*len(rs)/k:(i+1)*len(rs)/k]))
	}
	return out
}

// FailTurn is the turn of "will crash" (the process exits mid-turn, after a
// first word) or "will hang" (the turn blocks until cancelled).
func FailTurn(how string) Turn {
	if how == "crash" {
		return Turn{Say("starting"), Crash()}
	}
	return Turn{Hang()}
}

// TurnFromRows builds one turn from rows of | action | argument |: says,
// calls (TOOL with {json}, read by args), waits (a duration), waits until
// released, lists its tools, stops with REASON, crashes, hangs. It ends with
// end_turn unless a row ends it; a row after one that ends it is an error.
func TurnFromRows(rows [][]string, args func(js string) (map[string]any, error)) (Turn, error) {
	var turn Turn
	ended := false
	for i, cells := range rows {
		if ended {
			return nil, fmt.Errorf("row %d: nothing can follow a row that ends the turn", i+1)
		}
		if len(cells) == 0 {
			return nil, fmt.Errorf("row %d is empty", i+1)
		}
		arg := ""
		if len(cells) > 1 {
			arg = cells[1]
		}
		switch cells[0] {
		case "says":
			turn = append(turn, Say(arg))
		case "calls":
			tool, js, _ := strings.Cut(arg, " with ")
			a, err := args(js)
			if err != nil {
				return nil, fmt.Errorf("row %d: %w", i+1, err)
			}
			turn = append(turn, CallTool(strings.TrimSpace(tool), a))
		case "waits":
			d, err := time.ParseDuration(arg)
			if err != nil {
				return nil, fmt.Errorf("row %d: waits %q: %w", i+1, arg, err)
			}
			turn = append(turn, Wait(d))
		case "waits until":
			if arg != "released" {
				return nil, fmt.Errorf("row %d: waits until %q: the one barrier is | waits until | released |", i+1, arg)
			}
			turn = append(turn, WaitUntilReleased())
		case "lists its tools":
			turn = append(turn, ListTools())
		case "stops with":
			turn, ended = append(turn, Stop(acp.StopReason(arg))), true
		case "crashes":
			turn, ended = append(turn, Crash()), true
		case "hangs":
			turn, ended = append(turn, Hang()), true
		default:
			return nil, fmt.Errorf("row %d: unknown action %q; want says, calls, waits, waits until, lists its tools, stops with, crashes or hangs", i+1, cells[0])
		}
	}
	if !ended {
		turn = append(turn, Stop(acp.StopReasonEndTurn))
	}
	return turn, nil
}
