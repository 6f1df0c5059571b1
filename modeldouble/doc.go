// Package modeldouble is a scripted model API for tests: real coding agents
// (Claude Code, codex, gemini-cli, opencode, pi) take real turns against it on
// loopback, and each of its answers is the next step of a script the test
// wrote. It is to the model what fakehs is to the homeserver: an in-process
// server (New for a test, Start otherwise) that `zooid modeldouble` also runs
// standalone.
//
// One server speaks the APIs the presets' agents call:
//   - Anthropic Messages: POST …/v1/messages, JSON or SSE (Claude Code);
//   - OpenAI Chat Completions: POST …/chat/completions, JSON or SSE;
//   - OpenAI Responses: POST …/responses, JSON or SSE (codex);
//   - Gemini: POST …/models/{model}:generateContent and
//     :streamGenerateContent (gemini-cli).
//
// Each agent is pointed at a base URL of its own, BaseURL(agent, api), which
// carries the agent's name in its path: /agents/{name}/{api}. The script of
// that name answers, and every request is recorded under it, so a step can
// assert what that agent's model was sent: the system prompt, the tools
// offered with their schemas, the prompt and the tool results.
//
// A request that offers the model tools is a turn's request, and takes the
// script's next step: call a tool, say something (which ends the turn), or a
// fault (an HTTP error with Retry-After, a stream cut mid-answer, a slow
// stream). Requests that offer no tools are an agent's housekeeping (a title,
// a token count): they are recorded and answered with a short canned text,
// and take no step, so a script reads as the conversation the test means.
// A turn's request with no step left is answered with a text that says so,
// and the script records the miss (Script.Misses), so a test can fail on it;
// so is a WebSocket upgrade, refused with 426 Upgrade Required (the double
// serves HTTP only).
//
// Tool names in a script are Zooid's own (zooid_get_room_info); an agent that
// offers them under a prefix of its own (Claude Code's
// mcp__zooid__zooid_get_room_info) is answered with its own name for the
// tool: the one offered name that is the script's name or ends in "_" and
// the script's name.
package modeldouble
