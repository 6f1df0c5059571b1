package synapse

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// A snapshot is an image committed from a running Synapse's container: its
// database, media store and signing key, as Complement's blueprints keep a
// homeserver's state. Run with FromSnapshot starts a new Synapse from it with a
// fresh config (its own port, the registrations given to this Run), so what
// tests seeded into the snapshot is there at once instead of being sent again.

// FromSnapshot starts Synapse from an image Commit made: the image's database,
// media store and signing key are kept, the config and appservice registration
// files are written anew. A registration whose id was in the snapshot keeps the
// users and rooms in its namespace; give it the same tokens and namespaces.
func FromSnapshot(ref string) Option {
	return func(s *settings) {
		s.image = ref
		s.keepKey = true
	}
}

// Commit stops Synapse, so that its SQLite database is closed cleanly, writes
// files into the container (path → content, for example a description of what
// was seeded), and commits the container's filesystem as the image ref with
// labels. The container is removed afterwards, whatever the outcome.
func (c *Container) Commit(ctx context.Context, ref string, files map[string][]byte, labels map[string]string) error {
	defer func() { _ = c.Terminate(context.WithoutCancel(ctx)) }()
	for path, data := range files {
		if err := c.ctr.CopyToContainer(ctx, data, path, 0o644); err != nil {
			return fmt.Errorf("synapse: writing %s before the snapshot: %w", path, err)
		}
	}
	// Synapse stops on SIGTERM; ten seconds is ample for it to close the database.
	timeout := 30 * time.Second
	if err := c.ctr.Stop(ctx, &timeout); err != nil {
		return fmt.Errorf("synapse: stopping for the snapshot: %w", err)
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return fmt.Errorf("synapse: connecting to the Docker engine: %w", err)
	}
	defer cli.Close()
	// The image must not name this process as the owner of the containers
	// started from it: Run labels each with its own.
	changes := []string{}
	for _, k := range []string{OwnerPIDLabel, OwnerStartLabel, OwnerBootLabel, OwnerPIDNSLabel, URLLabel} {
		changes = append(changes, fmt.Sprintf("LABEL %q=%q", k, ""))
	}
	for k, v := range labels {
		changes = append(changes, fmt.Sprintf("LABEL %s=%s", dockerfileQuote(k), dockerfileQuote(v)))
	}
	if _, err := cli.ContainerCommit(ctx, c.ctr.GetContainerID(), client.ContainerCommitOptions{
		Reference: ref, Changes: changes, Comment: "zooid Synapse snapshot",
	}); err != nil {
		return fmt.Errorf("synapse: committing the snapshot %s: %w", ref, err)
	}
	return nil
}

// dockerfileQuote quotes s for a Dockerfile instruction: the engine expands
// $VAR in a change's quoted string (a Matrix event id starts with $), so a
// dollar is escaped after Go's quoting.
func dockerfileQuote(s string) string {
	return strings.ReplaceAll(strconv.Quote(s), "$", `\$`)
}

// ReadFile returns a file of the running container, for example the
// description a snapshot carries.
func (c *Container) ReadFile(ctx context.Context, path string) ([]byte, error) {
	rc, err := c.ctr.CopyFileFromContainer(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("synapse: reading %s: %w", path, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("synapse: reading %s: %w", path, err)
	}
	return b, nil
}

// Image is what the engine knows of an image.
type Image struct {
	ID     string
	Labels map[string]string
}

// InspectImage returns the image ref, and ok false when the engine has no
// such image. A snapshot's key includes the id of the image it was built on,
// so a rebuilt Synapse image never meets an old snapshot; its labels carry
// what the snapshot holds.
func InspectImage(ctx context.Context, ref string) (img Image, ok bool, err error) {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return Image{}, false, fmt.Errorf("synapse: connecting to the Docker engine: %w", err)
	}
	defer cli.Close()
	res, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return Image{}, false, nil
		}
		return Image{}, false, fmt.Errorf("synapse: inspecting image %s: %w", ref, err)
	}
	if res.ID == "" {
		return Image{}, false, errors.New("synapse: image " + ref + " has no id")
	}
	img.ID = res.ID
	if res.Config != nil {
		img.Labels = res.Config.Labels
	}
	return img, true, nil
}

// SnapshotSpec says how to find or build a snapshot (FindOrBuildSnapshot).
type SnapshotSpec struct {
	// Repo is the image repository of the snapshots; the tag is the key.
	Repo string
	// Version is part of the key: bump it when the way a snapshot is built
	// or described changes.
	Version int
	// Recipe is what the snapshot holds, as JSON: a changed recipe is
	// another key, so another snapshot.
	Recipe any
	// Build starts Synapse from base, seeds it and commits it as ref
	// (Container.Commit); it is called only when no image ref exists.
	Build func(ctx context.Context, base, ref string) error
}

// SnapshotKey names a snapshot by what it holds: the id of the image it is
// built on (a rebuilt Synapse image, or a rebuilt snapshot below this one,
// never meets an old snapshot), the spec's version and its recipe.
func SnapshotKey(baseImageID string, version int, recipe any) (string, error) {
	b, err := json.Marshal(struct {
		Version int    `json:"version"`
		Image   string `json:"image"`
		Recipes any    `json:"recipes"`
	}{version, baseImageID, recipe})
	if err != nil {
		return "", fmt.Errorf("synapse: encoding a snapshot's recipe: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// FindOrBuildSnapshot returns the snapshot of spec's recipe on the image
// base: the image spec.Repo:key when the engine has it, or else the one
// spec.Build commits (built is then true). Two processes on this machine
// never build the same snapshot at once: the second waits, then finds the
// image. After a build it removes the repository's older images (PruneImages),
// logging what it removed and any error there through logf: the new snapshot
// is good, a leftover only costs disk. base may itself be a snapshot (a chain
// of snapshots, each adding to the one before).
func FindOrBuildSnapshot(ctx context.Context, base string, spec SnapshotSpec, logf func(string, ...any)) (ref string, img Image, built bool, err error) {
	b, ok, err := InspectImage(ctx, base)
	if err != nil {
		return "", Image{}, false, err
	}
	if !ok {
		return "", Image{}, false, fmt.Errorf("synapse: no image %s to build a snapshot on (the Synapse image is built by docker/synapse-image.sh)", base)
	}
	key, err := SnapshotKey(b.ID, spec.Version, spec.Recipe)
	if err != nil {
		return "", Image{}, false, err
	}
	ref = spec.Repo + ":" + key
	unlock, err := buildLock(ref)
	if err != nil {
		return "", Image{}, false, err
	}
	defer unlock()
	if img, ok, err := InspectImage(ctx, ref); err != nil || ok {
		return ref, img, false, err
	}
	if err := spec.Build(ctx, base, ref); err != nil {
		return "", Image{}, false, fmt.Errorf("building the Synapse snapshot %s: %w", ref, err)
	}
	img, ok, err = InspectImage(ctx, ref)
	if err != nil {
		return "", Image{}, false, err
	}
	if !ok {
		return "", Image{}, false, fmt.Errorf("synapse: building the snapshot %s committed no image", ref)
	}
	// Snapshots of older keys (another Synapse image, older recipes) would
	// otherwise pile up on a CI machine's disk, a few hundred MB each.
	pruned, err := PruneImages(ctx, spec.Repo, ref)
	if len(pruned) > 0 {
		logf("removed older Synapse snapshots: %s", strings.Join(pruned, ", "))
	}
	if err != nil {
		logf("%v", err)
	}
	return ref, img, true, nil
}

// buildLock is an exclusive lock on a file named after ref, held until
// unlock.
func buildLock(ref string) (unlock func(), err error) {
	name := filepath.Join(os.TempDir(), "zooid-"+strings.NewReplacer(":", "-", "/", "-").Replace(ref)+".lock")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("snapshot lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("snapshot lock %s: %w", name, err)
	}
	return func() { _ = f.Close() }, nil
}
