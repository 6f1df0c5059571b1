package modeldouble

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Step is one answer of a scripted model: exactly one of its kinds is set.
type Step struct {
	// Call asks the agent to run the named tool with Args (a JSON object).
	Call string          `json:"call,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
	// Say answers with text and ends the turn. "{result}" in it becomes the
	// text of the last tool result the request carried, "{prompt}" the text
	// of the last prompt.
	Say string `json:"say,omitempty"`
	// Fault answers with a failure instead; the agent is expected to retry,
	// and its retry takes the next step.
	Fault *Fault `json:"fault,omitempty"`
	// Delay slows the answer: a streamed one waits this long before each
	// event after the first (a slow stream), a JSON one once before its body.
	// In a script file it is nanoseconds (time.Duration's JSON).
	Delay time.Duration `json:"delay,omitempty"`
}

// FaultKind names a way a model API fails.
type FaultKind string

// The faults a step can inject.
const (
	// FaultStatus answers with an HTTP error status (429, 500, 529, …) and
	// the API's error body; Retry-After is set when RetryAfter is.
	FaultStatus FaultKind = "status"
	// FaultCut starts a streamed answer and cuts the connection in the
	// middle of it (no final event).
	FaultCut FaultKind = "cut"
)

// Fault is an injected failure of one model request.
type Fault struct {
	Kind       FaultKind `json:"kind"`
	Status     int       `json:"status,omitempty"`
	RetryAfter int       `json:"retry_after,omitempty"` // seconds
}

// Validate says what is wrong with a step read from outside (a script file):
// exactly one kind set, arguments a JSON object, a fault of a known kind.
func (s Step) Validate() error {
	kinds := 0
	for _, set := range []bool{s.Call != "", s.Say != "", s.Fault != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return fmt.Errorf("a step is exactly one of call, say and fault")
	}
	if len(s.Args) > 0 && s.Call == "" {
		return fmt.Errorf("args belong to a call")
	}
	if len(s.Args) > 0 {
		var m map[string]any
		if err := json.Unmarshal(s.Args, &m); err != nil || m == nil {
			return fmt.Errorf("args must be a JSON object")
		}
	}
	if f := s.Fault; f != nil {
		switch f.Kind {
		case FaultStatus:
			if f.Status < 400 || f.Status > 599 {
				return fmt.Errorf("a status fault needs an HTTP error status (400-599), got %d", f.Status)
			}
		case FaultCut:
		default:
			return fmt.Errorf("unknown fault kind %q (status, cut)", f.Kind)
		}
	}
	return nil
}

func (s Step) String() string {
	switch {
	case s.Fault != nil && s.Fault.Kind == FaultStatus:
		return fmt.Sprintf("HTTP %d", s.Fault.Status)
	case s.Fault != nil:
		return string(s.Fault.Kind)
	case s.Call != "":
		return fmt.Sprintf("call %s %s", s.Call, s.Args)
	default:
		return fmt.Sprintf("say %q", s.Say)
	}
}

// Script is one agent's model: the steps its turn requests take, in order.
// It is safe for concurrent use; steps may be added while the agent runs.
type Script struct {
	mu     sync.Mutex
	steps  []Step
	next   int
	misses []string
	said   []string
}

// Add appends steps.
func (sc *Script) Add(steps ...Step) *Script {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.steps = append(sc.steps, steps...)
	return sc
}

// Call appends a tool call; args is a JSON object (empty means {}).
func (sc *Script) Call(tool, args string) *Script {
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	return sc.Add(Step{Call: tool, Args: json.RawMessage(args)})
}

// Say appends a final answer.
func (sc *Script) Say(text string) *Script { return sc.Add(Step{Say: text}) }

// take hands out the next step, or reports that none is left.
func (sc *Script) take() (Step, int, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.next >= len(sc.steps) {
		return Step{}, sc.next, false
	}
	st := sc.steps[sc.next]
	sc.next++
	return st, sc.next - 1, true
}

func (sc *Script) miss(why string) {
	sc.mu.Lock()
	sc.misses = append(sc.misses, why)
	sc.mu.Unlock()
}

func (sc *Script) sayDone(text string) {
	sc.mu.Lock()
	sc.said = append(sc.said, text)
	sc.mu.Unlock()
}

// Taken is how many steps have been handed out, and how many there are.
func (sc *Script) Taken() (taken, total int) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.next, len(sc.steps)
}

// Unfired lists the scripted faults not answered yet: a scenario that
// injects a fault proves nothing if the agent never got to it.
func (sc *Script) Unfired() []Step {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var out []Step
	for _, st := range sc.steps[sc.next:] {
		if st.Fault != nil {
			out = append(out, st)
		}
	}
	return out
}

// Misses lists what went wrong between the script and the agent: a turn's
// request with no step left, a tool the agent did not offer, a WebSocket
// asked for.
func (sc *Script) Misses() []string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return append([]string(nil), sc.misses...)
}

// Fired counts the injected faults of one kind that were answered.
func (sc *Script) Fired(k FaultKind) int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	n := 0
	for _, st := range sc.steps[:sc.next] {
		if st.Fault != nil && st.Fault.Kind == k {
			n++
		}
	}
	return n
}

// Said lists the texts the model answered with (placeholders resolved), in
// order: what the agent should go on to post.
func (sc *Script) Said() []string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return append([]string(nil), sc.said...)
}

// resolveTool maps a script's tool name to the name the agent offered it
// under: the name itself, or the one offered name ending in "_"+name.
func resolveTool(name string, offered []Tool) (string, error) {
	var found []string
	for _, t := range offered {
		if t.Name == name {
			return name, nil
		}
		if strings.HasSuffix(t.Name, "_"+name) {
			found = append(found, t.Name)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		names := make([]string, len(offered))
		for i, t := range offered {
			names[i] = t.Name
		}
		return "", fmt.Errorf("the script calls %s, which the agent did not offer (offered: %s)", name, strings.Join(names, ", "))
	default:
		return "", fmt.Errorf("the script calls %s, which the agent offers under several names: %s", name, strings.Join(found, ", "))
	}
}

// fill resolves a Say step's placeholders against the request it answers.
func fill(text string, r *Request) string {
	res := ""
	if n := len(r.ToolResults); n > 0 {
		res = r.ToolResults[n-1].Text
	}
	return strings.NewReplacer("{result}", res, "{prompt}", r.Prompt).Replace(text)
}
