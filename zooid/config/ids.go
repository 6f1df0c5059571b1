package config

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// This file normalises the names and Matrix ids zooid.yaml writes in short
// forms: agent names, user ids, room references, listen addresses.

// NamePattern is the grammar of agent and transport names: short, lower
// case, safe in socket paths, Matrix localparts and URLs.
const NamePattern = `^[a-z][a-z0-9-]{0,31}$`

var nameRE = regexp.MustCompile(NamePattern)

// ValidName reports whether s is a valid agent or transport name.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// DefaultUserID is the user id an agent gets when zooid.yaml names none, in
// the short form the transport's server_name completes: "@name", or
// "@workstation.name" for a daemon with a workstation ('.' is a valid
// localpart character and not one of a name's, so the two never collide).
func DefaultUserID(workstation, name string) string {
	if workstation == "" {
		return "@" + name
	}
	return "@" + workstation + "." + name
}

// SplitAddress reads how an agent is addressed, "name" or
// "workstation.name", into its parts (workstation "" for a bare name).
func SplitAddress(addr string) (workstation, name string) {
	if ws, n, ok := strings.Cut(addr, "."); ok {
		return ws, n
	}
	return "", addr
}

// errNoServer is a short-form id with no server_name to complete it.
var errNoServer = errors.New("has no server part and the transport has no server_name")

// normaliseUserID completes "@local" with server and checks the result.
func normaliseUserID(raw, server string) (id.UserID, error) {
	if !strings.HasPrefix(raw, "@") {
		return "", fmt.Errorf("must start with @, got %q", raw)
	}
	if !strings.Contains(raw, ":") {
		if server == "" {
			return "", fmt.Errorf("%q %w", raw, errNoServer)
		}
		raw += ":" + server
	}
	uid := id.UserID(raw)
	local, hs, err := uid.Parse()
	if err != nil || hs == "" {
		return "", fmt.Errorf("%q is not a Matrix user id", raw)
	}
	if err := id.ValidateUserLocalpart(local); err != nil {
		return "", fmt.Errorf("%q: %w", raw, err)
	}
	if server != "" && hs != server {
		return "", fmt.Errorf("%s is not on the transport's server %s", raw, server)
	}
	return uid, nil
}

// RoomRef is a room as zooid.yaml names it, normalised to one of two full
// forms: an alias "#name:server" or a room id "!opaque:server". The short
// alias "#name" is completed with the transport's server_name by the parser.
type RoomRef string

// ParseRoomRef normalises a room written as a short alias ("#general"), a
// full alias ("#general:example.org") or a room id ("!abc:example.org");
// server completes a short alias.
func ParseRoomRef(raw, server string) (RoomRef, error) {
	switch {
	case strings.HasPrefix(raw, "!"):
		if len(raw) < 2 {
			return "", fmt.Errorf("%q is not a room id", raw)
		}
		return RoomRef(raw), nil
	case strings.HasPrefix(raw, "#"):
		local, _, _ := strings.Cut(raw[1:], ":")
		if local == "" {
			return "", fmt.Errorf("%q is not a room alias", raw)
		}
		if !strings.Contains(raw, ":") {
			if server == "" {
				return "", fmt.Errorf("%q %w", raw, errNoServer)
			}
			raw += ":" + server
		}
		return RoomRef(raw), nil
	}
	return "", fmt.Errorf("must be a room alias (#name) or room id (!id), got %q", raw)
}

// RoomID is the room id when r is one.
func (r RoomRef) RoomID() (id.RoomID, bool) {
	if strings.HasPrefix(string(r), "!") {
		return id.RoomID(r), true
	}
	return "", false
}

// Alias is the room alias when r is one.
func (r RoomRef) Alias() (id.RoomAlias, bool) {
	if strings.HasPrefix(string(r), "#") {
		return id.RoomAlias(r), true
	}
	return "", false
}

// AliasResolver looks up room aliases; *mautrix.Client is one.
type AliasResolver interface {
	ResolveAlias(ctx context.Context, alias id.RoomAlias) (*mautrix.RespAliasResolve, error)
}

// Resolve gives the room id r stands for: r itself when it is a room id,
// else what the homeserver says the alias points to (an unknown alias is an
// error that matches mautrix.MNotFound).
func (r RoomRef) Resolve(ctx context.Context, hs AliasResolver) (id.RoomID, error) {
	if rid, ok := r.RoomID(); ok {
		return rid, nil
	}
	alias, ok := r.Alias()
	if !ok {
		return "", fmt.Errorf("room %q is neither an alias nor a room id", r)
	}
	resp, err := hs.ResolveAlias(ctx, alias)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", alias, err)
	}
	return resp.RoomID, nil
}

func validServerName(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	return host != "" && !strings.ContainsAny(host, "/@# ") && err == nil && n > 0 && n < 65536
}

func checkHostPort(v string) error {
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("must be host:port, got %q", v)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port must be a number 0-65535, got %q", port)
	}
	return nil
}

// isLoopback reports whether a host:port listens on loopback only. An empty
// host or an unspecified address ("0.0.0.0", "::") listens everywhere.
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
