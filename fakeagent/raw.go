package fakeagent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/mark3labs/mcp-go/mcp"
)

// callToolRaw is CallTool with Raw: n calls of name, each one hand-written
// JSON-RPC line to a bridge of the agent's own and the answer's line back.
// Every call is reported, after the last one; a failure is reported for
// each call it left unmade, so a waiter for n results hears of it.
func (a *agent) callToolRaw(ctx context.Context, s *session, name string, args map[string]any, n int) {
	results, err := a.rawCalls(ctx, s, name, args, n)
	for _, r := range results {
		a.report("tool_result", r)
	}
	for range n - len(results) {
		a.report("tool_result", ToolResult{SessionID: s.id, Tool: name, Args: args, Err: "raw call: " + err.Error()})
	}
}

func (a *agent) rawCalls(ctx context.Context, s *session, name string, args map[string]any, n int) ([]ToolResult, error) {
	var e *acp.McpServerStdio
	for _, srv := range s.servers {
		if srv.Stdio != nil {
			e = srv.Stdio
			break
		}
	}
	if e == nil {
		return nil, errors.New("the session has no stdio MCP server")
	}
	cmd := exec.CommandContext(ctx, e.Command, e.Args...)
	cmd.Env = os.Environ()
	for _, v := range e.Env {
		cmd.Env = append(cmd.Env, v.Name+"="+v.Value)
	}
	cmd.Dir = s.cwd
	cmd.Stderr = a.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("bridge stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bridge stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the bridge %s: %w", e.Command, err)
	}
	// The bridge ends when its stdin does; Wait reaps it.
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	r := bufio.NewReaderSize(stdout, 64<<10)

	// What mcp-go's client sends on a 2026-07-28 connection: the protocol
	// version, capabilities and client info in every request's _meta, and
	// server/discover in place of the initialize handshake.
	meta := map[string]any{
		mcp.MetaKeyProtocolVersion:    mcp.LATEST_PROTOCOL_VERSION,
		mcp.MetaKeyClientCapabilities: map[string]any{},
		mcp.MetaKeyClientInfo:         mcp.Implementation{Name: "zooid-fake-agent-raw", Version: "0"},
	}
	if args == nil {
		args = map[string]any{}
	}
	discover, err := json.Marshal(map[string]any{"_meta": meta})
	if err != nil {
		return nil, fmt.Errorf("encoding server/discover: %w", err)
	}
	call, err := json.Marshal(map[string]any{"_meta": meta, "name": name, "arguments": args})
	if err != nil {
		return nil, fmt.Errorf("encoding tools/call: %w", err)
	}
	var line []byte
	request := func(id int, method string, params []byte) ([]byte, time.Duration, error) {
		line = append(append(append(append(append(append(line[:0],
			`{"jsonrpc":"2.0","id":`...), strconv.Itoa(id)...), `,"method":"`...), method...), `","params":`...), params...)
		line = append(line, "}\n"...)
		t0 := time.Now()
		if _, err := stdin.Write(line); err != nil {
			return nil, 0, fmt.Errorf("writing %s to the bridge: %w", method, err)
		}
		for {
			answer, err := r.ReadBytes('\n')
			took := time.Since(t0)
			if err != nil {
				return nil, took, fmt.Errorf("reading the answer to %s from the bridge: %w", method, err)
			}
			var probe struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(answer, &probe) == nil && string(probe.ID) == strconv.Itoa(id) {
				return answer, took, nil
			}
			// A notification (tools/list_changed) or a stray line: not the answer.
		}
	}
	answer, _, err := request(0, string(mcp.MethodServerDiscover), discover)
	if err != nil {
		return nil, err
	}
	if _, err := rawResult(answer); err != nil {
		return nil, fmt.Errorf("server/discover: %w", err)
	}
	answers := make([]timedAnswer, 0, n)
	for i := range n {
		answer, took, err := request(i+1, string(mcp.MethodToolsCall), call)
		if err != nil {
			return decodeRaw(s, name, args, answers), err
		}
		answers = append(answers, timedAnswer{answer, took})
	}
	return decodeRaw(s, name, args, answers), nil
}

// timedAnswer is a tools/call answer line and how long it took to come.
type timedAnswer struct {
	line []byte
	took time.Duration
}

// decodeRaw turns answer lines into results, once the timed calls are over.
func decodeRaw(s *session, name string, args map[string]any, answers []timedAnswer) []ToolResult {
	out := make([]ToolResult, 0, len(answers))
	for _, t := range answers {
		res := ToolResult{SessionID: s.id, Tool: name, Args: args, Elapsed: t.took}
		result, err := rawResult(t.line)
		if err != nil {
			res.Err = err.Error()
		} else {
			if ctr, err := mcp.ParseCallToolResult(&result); err != nil {
				res.Err = fmt.Sprintf("decoding the tools/call result: %v", err)
			} else {
				res.IsError = ctr.IsError
				res.Structured = ctr.StructuredContent
				var texts []string
				for _, c := range ctr.Content {
					if tc, ok := mcp.AsTextContent(c); ok {
						texts = append(texts, tc.Text)
					}
				}
				res.Text = strings.Join(texts, "\n")
			}
		}
		out = append(out, res)
	}
	return out
}

// rawResult is a JSON-RPC answer's result, or its error as an error.
func rawResult(answer []byte) (json.RawMessage, error) {
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(answer, &resp); err != nil {
		return nil, fmt.Errorf("decoding the answer %q: %w", answer, err)
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("JSON-RPC error %d: %s", resp.Error.Code, resp.Error.Message)
	}
	if len(resp.Result) == 0 {
		return nil, fmt.Errorf("an answer without a result: %q", answer)
	}
	return resp.Result, nil
}
