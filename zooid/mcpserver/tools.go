package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// The tool handler: mcp-go's tool list and calls, answered by zooid/tools for
// the calling connection's binding (gating by its session kind).

func (s *Server) filterTools(ctx context.Context, in []mcp.Tool) []mcp.Tool {
	caller, ok, _ := s.callerOf(ctx)
	if !ok {
		return nil
	}
	out := make([]mcp.Tool, 0, len(in))
	for _, t := range in {
		if _, offered := tools.Lookup(caller.Kind, t.Name); offered {
			out = append(out, t)
		}
	}
	// What an agent's MCP client asked for shows whether it connected at all
	// (some adapters connect only at their first prompt, or not in an
	// untrusted folder).
	s.log.Debug("tools listed", "agent", caller.Agent, "kind", caller.Kind, "tools", len(out))
	return out
}

func (s *Server) handler(name string) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		caller, ok, pending := s.callerOf(ctx)
		if !ok {
			return mcp.NewToolResultError("forbidden: this session has ended; its binding is no longer valid"), nil
		}
		if pending {
			return mcp.NewToolResultError("unavailable: this session has no thread yet; try again once it is prompted"), nil
		}
		args := req.Params.RawArguments
		if len(args) == 0 && req.Params.Arguments != nil {
			raw, err := json.Marshal(req.Params.Arguments)
			if err != nil {
				return mcp.NewToolResultError("invalid_argument: arguments are not a JSON object"), nil
			}
			args = raw
		}
		start := time.Now()
		ctx, cancel := context.WithTimeoutCause(ctx, s.opts.CallTimeout, errCallTimeout)
		defer cancel()
		if s.opts.BeforeCall != nil {
			s.opts.BeforeCall(ctx, caller)
		}
		res, terr, cause := tools.Call(ctx, tools.Backends{Rooms: s.opts.Rooms, Tasks: s.opts.Tasks}, caller, name, args)
		if terr != nil && terr.Code == tools.CodeUnavailable && context.Cause(ctx) == errCallTimeout {
			terr = s.timedOut(name, caller)
		}
		if terr != nil {
			lvl := slog.LevelDebug
			if cause != nil {
				lvl = slog.LevelWarn
			}
			s.log.Log(ctx, lvl, "tool call failed", "tool", name, "agent", caller.Agent, "code", terr.Code, "err", errOr(cause, terr))
			s.opts.Trace.Record(traceTool(caller, name, args, "", terr.Error()))
			return mcp.NewToolResultError(terr.Error()), nil
		}
		text, err := json.Marshal(res)
		if err != nil {
			s.log.Error("encoding tool result", "tool", name, "err", err)
			return mcp.NewToolResultError("unavailable: the result could not be encoded"), nil
		}
		s.log.Debug("tool call", "tool", name, "agent", caller.Agent, "took", time.Since(start))
		s.opts.Trace.Record(traceTool(caller, name, args, string(text), ""))
		// The record's one encoding is both the text and the structured
		// content (which must be a JSON object; every result record is one),
		// sent as it is: decoding it into a map for mcp-go to encode again
		// was a tenth of the server's CPU in a call.
		out := mcp.NewToolResultText(string(text))
		if len(text) > 0 && text[0] == '{' {
			out.RawStructuredContent = text
		}
		return out, nil
	}
}

// errCallTimeout is the cause of a tool call's own deadline, told apart from
// the caller hanging up.
var errCallTimeout = errors.New("tool call deadline")

// timedOut is the error of a call cut at its deadline: the retryable
// "unavailable" a failing homeserver gets, saying how long was waited. A call
// that writes may have landed although no answer came, so it says to look
// before trying again. zooid_start_task_threads is never cut (its root posts
// outlive the call: a "try again" after they landed would start the tasks
// twice); each of its posts is bounded per try instead.
func (s *Server) timedOut(name string, c tools.Caller) *tools.Error {
	if t, ok := tools.Lookup(c.Kind, name); ok && !t.ReadOnly {
		return tools.Errorf(tools.CodeUnavailable, "the homeserver did not answer within %s; the message may have been posted: read the thread before sending it again", s.opts.CallTimeout)
	}
	return tools.Errorf(tools.CodeUnavailable, "the homeserver did not answer within %s; try again", s.opts.CallTimeout)
}

func errOr(a error, b error) error {
	if a != nil {
		return a
	}
	return b
}

// traceTool is the trace record of one tool call, in the caller's session.
func traceTool(c tools.Caller, name string, args []byte, result, errText string) trace.Record {
	return trace.Record{Kind: trace.KindTool, Room: c.Room, Session: c.SessionKey,
		Tool: &trace.ToolCall{Agent: c.Agent, Tool: name, Args: string(args), Result: result, Error: errText}}
}
