// Package handshake is the agent socket's own protocol, the one line each
// way before MCP begins: a client (the `zooid mcp` bridge, or the pi
// extension) names its session, the daemon's MCP server accepts or refuses.
// Both sides import it from here, as mcp-go keeps its protocol types in
// mcp/ apart from server/ and client/.
package handshake

// Hello is the first line a client writes on the socket.
type Hello struct {
	Binding string `json:"zooid_binding,omitempty"`
	// ACPSession names the binding by the agent's ACP session id instead: the pi
	// extension knows its session id but is never given a binding id.
	ACPSession string `json:"zooid_acp_session,omitempty"`
}

// Welcome is the daemon's one-line answer to Hello. On refusal the daemon closes
// the connection after writing it.
type Welcome struct {
	OK    bool   `json:"zooid_ok"`
	Error string `json:"zooid_error,omitempty"`
}

// RefusedMessage is the one refusal text for an unknown binding and for another
// agent's binding alike, so a socket cannot be used to probe for bindings.
const RefusedMessage = "binding refused: not a live session of this socket's agent"

// MaxLine bounds one JSON-RPC line in either direction.
const MaxLine = 16 << 20

// BindingEnv is the environment variable that carries the session binding id
// to the bridge. It is not an argument, so it stays out of /proc/<pid>/cmdline;
// the daemon does not rely on its secrecy either (it checks the socket's peer).
const BindingEnv = "ZOOID_BINDING"
