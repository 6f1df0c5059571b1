// Package unixuser resolves the unix user an agent runs as (zooid.yaml's
// user:), says whether the daemon may switch to it, and answers what that
// user can reach on disk by asking the kernel as that user: a probe runs on
// a thread of its own whose filesystem uid, gid and groups are the user's,
// so modes, ACLs and every parent directory count exactly as they will for
// the agent.
package unixuser

import (
	"errors"
	"fmt"
	"os/user"
	"regexp"
	"slices"
	"strconv"
	"syscall"
)

// User is a resolved unix user.
type User struct {
	// Spec is the value as written in zooid.yaml: a user name, uid or uid:gid.
	Spec string
	// Name is the passwd name; empty for a uid without a passwd entry.
	Name string
	UID  uint32
	GID  uint32
	// Groups are the supplementary groups: a named user's groups from the
	// group database, none for a uid without a passwd entry.
	Groups []uint32
	// Home is the passwd home directory; empty without a passwd entry.
	Home string
}

// String names the user for messages: "zooid-a (uid 1001)".
func (u User) String() string {
	if u.Name != "" {
		return fmt.Sprintf("%s (uid %d)", u.Name, u.UID)
	}
	return fmt.Sprintf("uid %d", u.UID)
}

// Credential is what the agent's process is started with.
func (u User) Credential() *syscall.Credential {
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: slices.Clone(u.Groups)}
}

var numericRE = regexp.MustCompile(`^([0-9]+)(?::([0-9]+))?$`)

// Resolve reads spec: a user name, a uid, or uid:gid. A name or uid with a
// passwd entry takes its primary group, its supplementary groups and its
// home; uid:gid is exactly those two ids, with no supplementary groups (and
// the home of the uid's passwd entry, if it has one); a uid without a passwd
// entry needs its :gid.
func Resolve(spec string) (User, error) {
	u := User{Spec: spec}
	if m := numericRE.FindStringSubmatch(spec); m != nil {
		uid, err := strconv.ParseUint(m[1], 10, 32)
		if err != nil {
			return u, fmt.Errorf("uid %s: %w", m[1], err)
		}
		u.UID = uint32(uid)
		pw, lookErr := user.LookupId(m[1])
		if lookErr == nil {
			if err := u.fill(pw); err != nil {
				return u, err
			}
		}
		if m[2] != "" {
			gid, err := strconv.ParseUint(m[2], 10, 32)
			if err != nil {
				return u, fmt.Errorf("gid %s: %w", m[2], err)
			}
			// Exactly the ids written: no groups from the passwd entry.
			u.GID, u.Groups = uint32(gid), nil
		} else if lookErr != nil {
			return u, fmt.Errorf("uid %d has no passwd entry: give its group too, as %d:GID", u.UID, u.UID)
		}
		return u, nil
	}
	pw, err := user.Lookup(spec)
	if err != nil {
		var unknown user.UnknownUserError
		if errors.As(err, &unknown) {
			return u, fmt.Errorf("no user named %q on this machine: create it (useradd --system --no-create-home %s) or give a uid:gid", spec, spec)
		}
		return u, fmt.Errorf("looking up user %q: %w", spec, err)
	}
	u.UID = 0
	if err := u.fill(pw); err != nil {
		return u, err
	}
	return u, nil
}

func (u *User) fill(pw *user.User) error {
	uid, err1 := strconv.ParseUint(pw.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(pw.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("user %s: %w", pw.Username, err)
	}
	u.Name, u.UID, u.GID, u.Home = pw.Username, uint32(uid), uint32(gid), pw.HomeDir
	ids, err := pw.GroupIds()
	if err != nil {
		return fmt.Errorf("user %s: reading its groups: %w", pw.Username, err)
	}
	u.Groups = nil
	for _, s := range ids {
		g, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return fmt.Errorf("user %s: group %q: %w", pw.Username, s, err)
		}
		if uint32(g) != u.GID {
			u.Groups = append(u.Groups, uint32(g))
		}
	}
	return nil
}

// CanOpen says whether u can open path for reading (a file's content, a
// directory's listing).
func CanOpen(u User, path string) (bool, error) {
	var ok bool
	err := As(u, func() error {
		f, err := openRead(path)
		if err == nil {
			f.Close()
			ok = true
		}
		return nil
	})
	return ok, err
}

// CanSearch says whether u can reach names inside the directory path (it
// and every parent are searchable for u).
func CanSearch(u User, path string) (bool, error) {
	var ok bool
	err := As(u, func() error {
		ok = statOK(path + "/.")
		return nil
	})
	return ok, err
}

// CanExec says whether u may execute the file at path.
func CanExec(u User, path string) (bool, error) {
	var ok bool
	err := As(u, func() error {
		ok = execOK(path)
		return nil
	})
	return ok, err
}
