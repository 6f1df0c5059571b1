package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Command is the argv of `zooid sandbox` for an agent whose program is
// command (an absolute path) with args: prefix is the wrapper's own argv
// prefix (the zooid binary and "sandbox").
func Command(prefix []string, command string, args []string) []string {
	out := slices.Clone(prefix)
	out = append(out, "--", command)
	return append(out, args...)
}

// EnvOf is the KEY=VALUE that hands p to the wrapper.
func EnvOf(p Policy) (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encoding the sandbox policy: %w", err)
	}
	return Env + "=" + string(b), nil
}

// Enter applies the policy in $Env to this whole process (every thread)
// and removes the variable, so nothing this process starts sees it. It is
// for a program that is itself the agent's: `<program> sandbox -- <program>
// ARGS…` can go on as ARGS in-process instead of exec'ing itself again (the
// harness's scripted agent does; zooid execs, see Main).
func Enter() error {
	raw, ok := os.LookupEnv(Env)
	if !ok {
		return fmt.Errorf("$%s is not set: the daemon starts agents through `sandbox`, with their policy there", Env)
	}
	var p Policy
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return fmt.Errorf("reading $%s: %w", Env, err)
	}
	if err := os.Unsetenv(Env); err != nil {
		return fmt.Errorf("unsetting $%s: %w", Env, err)
	}
	return restrict(p)
}

// Itself is, for the arguments of `sandbox` (`-- COMMAND ARGS…`), ARGS
// when COMMAND is this very executable: such a program can Enter the
// sandbox and go on as ARGS in-process.
func Itself(args []string) ([]string, bool) {
	if len(args) < 3 || args[0] != "--" {
		return nil, false
	}
	self, err := os.Executable()
	if err != nil {
		return nil, false
	}
	target, err := filepath.EvalSymlinks(args[1])
	if err != nil {
		return nil, false
	}
	if real, err := filepath.EvalSymlinks(self); err != nil || real != target {
		return nil, false
	}
	return args[2:], true
}

// Main is `zooid sandbox -- COMMAND ARGS…`: it reads its Policy from $Env,
// applies it to itself and execs COMMAND (an absolute path, as the daemon
// resolves it; a bare name is looked up on PATH) with the rest of its
// environment. It returns only on failure: 2 for a bad invocation, 127 for
// a command not found, 126 when the sandbox or the exec failed; the agent
// never runs unsandboxed.
func Main(args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "zooid sandbox: usage: zooid sandbox -- COMMAND [ARGS…] (started by the daemon, with the policy in $"+Env+")")
		return 2
	}
	raw, ok := os.LookupEnv(Env)
	if !ok {
		fmt.Fprintf(stderr, "zooid sandbox: $%s is not set: the daemon starts agents through this command, with their policy there\n", Env)
		return 2
	}
	var p Policy
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		fmt.Fprintf(stderr, "zooid sandbox: reading $%s: %v\n", Env, err)
		return 2
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, Env+"=") })
	if !filepath.IsAbs(args[0]) {
		path, err := exec.LookPath(args[0])
		if err == nil {
			path, err = filepath.Abs(path)
		}
		if err != nil {
			fmt.Fprintf(stderr, "zooid sandbox: %v\n", err)
			return 127
		}
		args = append([]string{path}, args[1:]...)
	}
	err := restrictAndExec(p, args, env)
	fmt.Fprintf(stderr, "zooid sandbox: %v\n", err)
	return 126
}
