package mcpserver_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/zooid/handshake"

	"github.com/zooid-dev/zooid/zooid/bridge"
	"github.com/zooid-dev/zooid/zooid/mcpserver"
)

// agentMain stands in for an agent process: it reads one line from stdin (the
// binding id, known only once the test has seen this process's pid), then runs
// argv as its child with that binding in $ZOOID_BINDING and the rest of stdin,
// as an agent starts its bridge. It returns the child's exit code.
func agentMain(argv []string) int {
	var line []byte
	b := make([]byte, 1)
	for {
		// Byte by byte, so the child inherits stdin from just after the line.
		if _, err := os.Stdin.Read(b); err != nil {
			return 3
		}
		if b[0] == '\n' {
			break
		}
		line = append(line, b[0])
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), handshake.BindingEnv+"="+string(line))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return 4
	}
	return 0
}

const ping = `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"

// bridgeRun is how one bridge run ended.
type bridgeRun struct {
	code           int
	stdout, stderr string
}

func wait(t *testing.T, cmd *exec.Cmd, stdout, stderr *strings.Builder) bridgeRun {
	t.Helper()
	err := cmd.Wait()
	r := bridgeRun{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("running %v: %v", cmd.Args, err)
	}
	return r
}

// stagedAgent is a stand-in agent process started before its binding exists.
type stagedAgent struct {
	cmd            *exec.Cmd
	in             io.WriteCloser
	stdout, stderr strings.Builder
	proc           mcpserver.Process
}

// startAgent starts a stand-in agent that will run the bridge for socket.
func startAgent(t *testing.T, socket string) *stagedAgent {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a := &stagedAgent{cmd: exec.Command(exe, "agent", exe, "mcp", "--socket", socket)}
	a.cmd.Env = []string{}
	a.cmd.Stdout, a.cmd.Stderr = &a.stdout, &a.stderr
	if a.in, err = a.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.in.Close()
		_ = a.cmd.Process.Kill()
		_ = a.cmd.Wait()
	})
	if a.proc, err = mcpserver.ProcessOf(a.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	return a
}

// run hands the agent its binding and a ping for its bridge, and waits.
func (a *stagedAgent) run(t *testing.T, binding string) bridgeRun {
	t.Helper()
	if _, err := io.WriteString(a.in, binding+"\n"+ping); err != nil {
		t.Fatal(err)
	}
	a.in.Close()
	return wait(t, a.cmd, &a.stdout, &a.stderr)
}

// runBridge runs the bridge as this test's own child (not the agent's) with
// the given binding and one ping.
func runBridge(t *testing.T, socket, binding string) bridgeRun {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "mcp", "--socket", socket)
	cmd.Env = []string{handshake.BindingEnv + "=" + binding}
	cmd.Stdin = strings.NewReader(ping)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return wait(t, cmd, &stdout, &stderr)
}

// TestOnlyTheAgentAndItsDescendantsAreServed: a binding id is not a
// credential by itself. A process that copied it but is not the agent's
// descendant, and the agent's own bridge on another agent's socket, get
// exactly the refusal an unknown binding gets; the agent's bridge on its own
// socket is served.
func TestOnlyTheAgentAndItsDescendantsAreServed(t *testing.T) {
	srv := newServer(t, &echoRooms{}, nil)
	sockA, err := srv.ListenAgent("agent-a")
	if err != nil {
		t.Fatal(err)
	}
	sockB, err := srv.ListenAgent("agent-b")
	if err != nil {
		t.Fatal(err)
	}

	unknown := runBridge(t, sockA, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	if unknown.code != 1 || unknown.stdout != "" || !strings.Contains(unknown.stderr, handshake.RefusedMessage) {
		t.Fatalf("unknown binding: %+v", unknown)
	}

	agent := startAgent(t, sockA)
	bid := srv.Bind(conversation("agent-a"), agent.proc)
	// A sibling of the agent (the test's own child) with the right binding.
	if copied := runBridge(t, sockA, bid); copied != unknown {
		t.Fatalf("a copied binding from a non-descendant:\n got %+v\nwant %+v (as an unknown binding)", copied, unknown)
	}
	// The agent's own parent (this test) dialling in-process.
	if _, _, err := bridge.Dial(context.Background(), sockA, bid); err == nil || !strings.Contains(err.Error(), handshake.RefusedMessage) {
		t.Fatalf("the agent's parent with its binding: %v, want refused", err)
	}

	// The agent's bridge (its child) on agent-b's socket.
	other := startAgent(t, sockB)
	otherBid := srv.Bind(conversation("agent-a"), other.proc)
	if foreign := other.run(t, otherBid); foreign != unknown {
		t.Fatalf("a binding on another agent's socket:\n got %+v\nwant %+v", foreign, unknown)
	}

	// The same binding from the agent's own bridge is served.
	served := agent.run(t, bid)
	if served.code != 0 || !strings.Contains(served.stdout, `"id":1`) || !strings.Contains(served.stdout, `"result"`) {
		t.Fatalf("the agent's own bridge: %+v", served)
	}
}

// TestTheAgentProcessItselfIsServed: a binding serves the agent process too,
// not only its children (an extension running inside the agent connects from
// the agent's own pid).
func TestTheAgentProcessItselfIsServed(t *testing.T) {
	srv := newServer(t, &echoRooms{}, nil)
	sock, err := srv.ListenAgent("agent-a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _, err := bridge.Dial(ctx, sock, srv.Bind(conversation("agent-a"), self(t)))
	if err != nil {
		t.Fatalf("the agent process itself: %v", err)
	}
	conn.Close()
}

// TestBindingIsNotInTheBridgesArgv: the entry an agent gets carries the
// binding in the bridge's environment only.
func TestBindingIsNotInTheBridgesArgv(t *testing.T) {
	srv := newServer(t, &echoRooms{}, nil)
	if _, err := srv.ListenAgent("agent-a"); err != nil {
		t.Fatal(err)
	}
	bid := srv.Bind(conversation("agent-a"), self(t))
	e := srv.StdioEntry(bid).Stdio
	if strings.Contains(strings.Join(append([]string{e.Command}, e.Args...), " "), bid) {
		t.Fatalf("binding in the bridge's argv: %q %q", e.Command, e.Args)
	}
	if len(e.Env) != 1 || e.Env[0].Name != handshake.BindingEnv || e.Env[0].Value != bid {
		t.Fatalf("bridge env %+v, want only %s", e.Env, handshake.BindingEnv)
	}
}

// helloACP sends a pi-extension style hello (the session named by its ACP
// session id, which is no secret) and returns the daemon's answer line.
func helloACP(t *testing.T, sock, acpSession string) string {
	t.Helper()
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, `{"zooid_acp_session":"`+acpSession+`"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return line
}

// TestACPSessionNamesAreCheckedToo: a session named by its ACP session id (as
// the pi extension does) is served to the agent process and refused, as an
// unknown one is, to a process outside the agent's tree.
func TestACPSessionNamesAreCheckedToo(t *testing.T) {
	srv := newServer(t, &echoRooms{}, nil)
	sock, err := srv.ListenAgent("agent-a")
	if err != nil {
		t.Fatal(err)
	}
	unknown := helloACP(t, sock, "no-such-session")
	if !strings.Contains(unknown, handshake.RefusedMessage) {
		t.Fatalf("unknown ACP session: %q", unknown)
	}
	agent := startAgent(t, sock)
	srv.BindACPSession(srv.Bind(conversation("agent-a"), agent.proc), "child-session")
	if got := helloACP(t, sock, "child-session"); got != unknown {
		t.Fatalf("another process's ACP session from outside its tree: %q, want %q", got, unknown)
	}
	srv.BindACPSession(srv.Bind(conversation("agent-a"), self(t)), "own-session")
	if got := helloACP(t, sock, "own-session"); !strings.Contains(got, `"zooid_ok":true`) {
		t.Fatalf("the agent's own ACP session: %q", got)
	}
}
