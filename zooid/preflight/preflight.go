// Package preflight says what a config that config.Load accepted will meet when the daemon
// starts: an agent whose program is not where the agent will look for it, and an
// appservice registration (the file the homeserver was given) that does not match the
// config. Those are not refusals — the daemon starts, and the first mention or the
// homeserver fails instead — so `zooid check` prints them as warnings with the fix, and
// `zooid run` logs the same ones at start.
package preflight

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"maunium.net/go/mautrix/appservice"

	"github.com/zooid-dev/zooid/zooid/acpagent"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/matrix"
)

// DefaultRegistration is the registration file looked for beside zooid.yaml when none is
// named: where `zooid registration --config zooid.yaml > registration.yaml` puts it.
const DefaultRegistration = "registration.yaml"

// Finding is one thing start-up will meet: the config key it concerns and what to do.
type Finding struct {
	// Path is the dotted key the finding is about (agents.helper.acp), or the
	// registration file.
	Path string
	Msg  string
}

func (f Finding) String() string { return f.Path + ": " + f.Msg }

// Options says where to look.
type Options struct {
	// Registration is the appservice registration file the homeserver holds; empty looks
	// for DefaultRegistration beside the config, and checks nothing when there is none.
	Registration string
}

// Check returns what cfg will meet at start, in config order; nil when nothing.
func Check(cfg *config.Config, opts Options) []Finding {
	var out []Finding
	for _, a := range cfg.Agents {
		if f, ok := checkCommand(a); ok {
			out = append(out, f)
		}
	}
	return append(out, checkRegistration(cfg, opts)...)
}

// RegistrationFile is the registration file Check reads for cfg: opts.Registration, or
// DefaultRegistration beside the config when it exists ("" when neither).
func RegistrationFile(cfg *config.Config, opts Options) string {
	if opts.Registration != "" {
		return opts.Registration
	}
	p := filepath.Join(filepath.Dir(cfg.File), DefaultRegistration)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

// checkCommand finds an agent's program as the agent will: on the PATH its acp.env gives
// it, then on the daemon's (acpagent.LookCommand). An agent in a container runs a program
// of its image, which only the image can say; the demo agent is the daemon's own binary.
func checkCommand(a config.Agent) (Finding, bool) {
	if a.Runtime == config.RuntimeDocker || a.ACP.RunsSelf() {
		return Finding{}, false // the image's program; or zooid itself (demo)
	}
	command, _ := a.ACP.Resolve()
	env := []string{"PATH=" + os.Getenv("PATH")}
	if p, ok := a.ACP.Environment()["PATH"]; ok {
		env = []string{"PATH=" + p}
	}
	if _, err := acpagent.LookCommand(command, env); err == nil {
		return Finding{}, false
	}
	path := "agents." + a.Name + ".acp"
	where := "on the agent's PATH (" + strings.TrimPrefix(env[0], "PATH=") + ")"
	if strings.ContainsRune(command, '/') {
		where = "an executable file"
	}
	var fix string
	switch {
	case a.ACP.Command != "":
		fix = "set acp.command to the agent's program (a path, or a name on its PATH)"
	case config.PresetInstall(a.ACP.Preset) != "":
		fix = fmt.Sprintf("install the adapter (%s), or put its directory first on the agent's PATH with acp.env PATH", config.PresetInstall(a.ACP.Preset))
	default:
		fix = "install it, or put its directory first on the agent's PATH with acp.env PATH"
	}
	what := "command " + command
	if a.ACP.Command == "" {
		what = fmt.Sprintf("preset %s starts %s, which", a.ACP.Preset, command)
	} else {
		what += ", which"
	}
	return Finding{Path: path, Msg: fmt.Sprintf("%s is not %s: every mention of %s would answer that it could not be started; %s",
		what, where, a.Name, fix)}, true
}

// checkRegistration compares the registration file the homeserver holds with what `zooid
// registration` makes of cfg: the id and tokens must be the same, the url must lead to the
// push listener, and the namespaces must hold the agents' users and the rooms' aliases
// (broader namespaces, such as docker/compose's, are fine).
func checkRegistration(cfg *config.Config, opts Options) []Finding {
	file := RegistrationFile(cfg, opts)
	if file == "" {
		return nil
	}
	var mt *config.MatrixTransport
	for _, t := range cfg.Transports {
		if t.Matrix != nil {
			mt = t.Matrix
		}
	}
	if mt == nil {
		return nil
	}
	fix := fmt.Sprintf("regenerate it (zooid registration --config %s > %s), install it on the homeserver and restart the homeserver, which reads registrations only at start",
		cfg.File, file)
	reg, err := appservice.LoadRegistration(file)
	if err != nil {
		return []Finding{{Path: file, Msg: fmt.Sprintf("reading the appservice registration: %v; %s", err, fix)}}
	}
	want := matrix.Registration(matrix.OptionsFromConfig(cfg, mt), "")
	var msgs []string
	if reg.ID != want.ID {
		msgs = append(msgs, fmt.Sprintf("its id is %q, the matrix transport's is %q (the start-up ping fails with M_FORBIDDEN)", reg.ID, want.ID))
	}
	if reg.AppToken != want.AppToken {
		msgs = append(msgs, "its as_token differs from the matrix transport's (the homeserver refuses the daemon: M_UNKNOWN_TOKEN)")
	}
	if reg.ServerToken != want.ServerToken {
		msgs = append(msgs, fmt.Sprintf("its hs_token differs from the matrix transport's %s (the daemon refuses the homeserver's pushes)", cmp.Or(mt.HSTokenFrom, "hs_token")))
	}
	if reg.SenderLocalpart != want.SenderLocalpart {
		msgs = append(msgs, fmt.Sprintf("its sender_localpart is %q, the matrix transport's is %q", reg.SenderLocalpart, want.SenderLocalpart))
	}
	if cfg.Encryption {
		var missing []string
		if !reg.EphemeralEvents && !reg.SoruEphemeralEvents {
			missing = append(missing, "receive_ephemeral (room keys in transactions, MSC2409)")
		}
		if !reg.MSC3202 {
			missing = append(missing, "org.matrix.msc3202 (one-time key counts and device lists in transactions)")
		}
		if !reg.MSC4190 {
			missing = append(missing, "io.element.msc4190 (the agents' devices made without a login)")
		}
		if len(missing) > 0 {
			msgs = append(msgs, fmt.Sprintf("encryption: true needs it to ask for %s, or the agents get no devices (start-up stops) or never hear their room keys",
				strings.Join(missing, ", ")))
		}
	}
	if mt.Listen != "" && strings.TrimRight(reg.URL, "/") != "http://"+mt.Listen {
		msgs = append(msgs, fmt.Sprintf("its url is %q, but the daemon listens for pushes on %s (fine only if a proxy forwards one to the other)", reg.URL, mt.Listen))
	}
	for _, a := range cfg.Agents {
		if a.Matrix == nil {
			continue
		}
		if !inNamespace(reg.Namespaces.UserIDs, string(a.Matrix.UserID)) {
			msgs = append(msgs, fmt.Sprintf("its user namespaces do not hold agent %s's user %s (start-up stops: registering it is refused with M_EXCLUSIVE)", a.Name, a.Matrix.UserID))
		}
	}
	var aliases []string
	for _, a := range cfg.Agents {
		if a.Matrix == nil {
			continue
		}
		for _, r := range a.Matrix.Rooms {
			if alias, ok := r.Alias(); ok && !slices.Contains(aliases, string(alias)) {
				aliases = append(aliases, string(alias))
			}
		}
	}
	for _, alias := range aliases {
		if !inNamespace(reg.Namespaces.RoomAliases, alias) {
			msgs = append(msgs, fmt.Sprintf("its alias namespaces do not hold %s (if the room does not exist yet, the daemon may not create it and that room is not served)", alias))
		}
	}
	out := make([]Finding, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, Finding{Path: file, Msg: m + "; " + fix})
	}
	return out
}

// inNamespace matches s against namespaces as Synapse does: each regex anchored at the
// start only (Python's re.match). A regex Go can't compile matches nothing.
func inNamespace(nss appservice.NamespaceList, s string) bool {
	for _, ns := range nss {
		re, err := regexp.Compile("^(?:" + ns.Regex + ")")
		if err == nil && re.MatchString(s) {
			return true
		}
	}
	return false
}

// ErrWarnings is what Check's findings amount to for a caller that treats them as errors
// (zooid check --strict).
var ErrWarnings = errors.New("start-up would meet the warnings above")
