package preflight

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/matrix"
)

// Overlaps compares this daemon's appservice with the registrations of other
// appservices on its homeserver (the files the operator names: other Zooid
// daemons' registrations, bridges, bots), and returns an error naming both
// sides of each overlap, nil when there is none: a user that two
// registrations claim is woken, answered and marked by both, so several
// daemons in one room need namespaces apart. An overlap is:
//   - one of this daemon's users (an agent, or the appservice's sender) in
//     another registration's user namespaces, or that registration's sender;
//   - another registration's sender, or a user its namespace names exactly,
//     in the user namespaces of this daemon's installed registration (own,
//     as Check finds it; broader than the agents' ids when hand-written);
//   - the same id or as_token (the homeserver tells the two apart by those).
//
// Namespaces are matched as Synapse does (inNamespace).
func Overlaps(cfg *config.Config, own string, others []string) error {
	var mt *config.MatrixTransport
	for _, t := range cfg.Transports {
		if t.Matrix != nil {
			mt = t.Matrix
		}
	}
	if mt == nil || len(others) == 0 {
		return nil
	}
	ours := matrix.Registration(matrix.OptionsFromConfig(cfg, mt), "")
	server := mt.ServerName
	users := []ownUser{{id.NewUserID(ours.SenderLocalpart, server), "the appservice sender (transports.matrix.sender_localpart)"}}
	for _, a := range cfg.Agents {
		if a.Matrix != nil {
			users = append(users, ownUser{a.Matrix.UserID, fmt.Sprintf("agent %s's user (agents.%s.matrix.user_id)", a.Name, a.Name)})
		}
	}
	var installed *appservice.Registration
	if own != "" {
		if reg, err := appservice.LoadRegistration(own); err == nil {
			installed = reg
		}
	}
	var errs []string
	for _, file := range others {
		reg, err := appservice.LoadRegistration(file)
		if err != nil {
			errs = append(errs, fmt.Sprintf("reading the other registration %s: %v", file, err))
			continue
		}
		them := fmt.Sprintf("the registration %q (%s)", reg.ID, file)
		if reg.ID == ours.ID {
			errs = append(errs, fmt.Sprintf("%s has this daemon's appservice id %q: give each daemon its own id (transports.matrix.id)", them, ours.ID))
		}
		if reg.AppToken == ours.AppToken {
			errs = append(errs, fmt.Sprintf("%s has this daemon's as_token: give each daemon its own", them))
		}
		sender := id.NewUserID(reg.SenderLocalpart, server)
		for _, u := range users {
			if u.id == sender {
				errs = append(errs, fmt.Sprintf("%s %s is the sender of %s", u.what, u.id, them))
				continue
			}
			if ns, ok := namespaceOf(reg.Namespaces.UserIDs, string(u.id)); ok {
				errs = append(errs, fmt.Sprintf("%s %s is in the user namespace %q of %s", u.what, u.id, ns, them))
			}
		}
		if installed == nil {
			continue
		}
		theirs := []id.UserID{sender}
		for _, ns := range reg.Namespaces.UserIDs {
			if u, ok := exactUser(ns.Regex); ok {
				theirs = append(theirs, u)
			}
		}
		for _, u := range theirs {
			if ns, ok := namespaceOf(installed.Namespaces.UserIDs, string(u)); ok && !claimed(users, u) {
				errs = append(errs, fmt.Sprintf("%s's user %s is in the user namespace %q of this daemon's registration %q (%s)", them, u, ns, installed.ID, own))
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New("the appservice namespaces overlap: " + strings.Join(errs, "; ") +
		"; each daemon needs user namespaces of its own (with workstation: set, its agents' default user ids are @workstation.name)")
}

// ownUser is one of this daemon's users and what it is, for the error.
type ownUser struct {
	id   id.UserID
	what string
}

// claimed reports whether u is one of this daemon's users (reported already).
func claimed(users []ownUser, u id.UserID) bool {
	for _, o := range users {
		if o.id == u {
			return true
		}
	}
	return false
}

// namespaceOf is inNamespace, naming the namespace that matched.
func namespaceOf(nss appservice.NamespaceList, s string) (string, bool) {
	for _, ns := range nss {
		if inNamespace(appservice.NamespaceList{ns}, s) {
			return ns.Regex, true
		}
	}
	return "", false
}

// exactUser reads a namespace that names one user, as `zooid registration`
// writes them (^@user:server$, quoted).
func exactUser(regex string) (id.UserID, bool) {
	inner, ok := strings.CutPrefix(regex, "^")
	if !ok {
		return "", false
	}
	inner, ok = strings.CutSuffix(inner, "$")
	if !ok {
		return "", false
	}
	re, err := regexp.Compile(inner)
	if err != nil {
		return "", false
	}
	lit, complete := re.LiteralPrefix()
	if !complete || !strings.HasPrefix(lit, "@") {
		return "", false
	}
	return id.UserID(lit), true
}
