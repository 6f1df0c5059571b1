package synapse

import (
	"context"
	"errors"
	"fmt"
	"io"
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
		changes = append(changes, fmt.Sprintf("LABEL %q=%q", k, v))
	}
	if _, err := cli.ContainerCommit(ctx, c.ctr.GetContainerID(), client.ContainerCommitOptions{
		Reference: ref, Changes: changes, Comment: "zooid Synapse snapshot",
	}); err != nil {
		return fmt.Errorf("synapse: committing the snapshot %s: %w", ref, err)
	}
	return nil
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
