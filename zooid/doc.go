// Package zooid is the root of the Zooid daemon: a bridge between Matrix rooms and
// coding agents speaking ACP, serving each agent the Zooid MCP tools.
//
// Subpackages each own one concern; none imports test code.
package zooid
