package synapse

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// Owner labels name the process that started a container: a test binary that is
// killed never runs its cleanup, and the package disables testcontainers' reaper,
// so without them nothing could tell its Synapse from one a live process still
// uses. Run sweeps the leftovers before it starts a container (Sweep).
const (
	// OwnerPIDLabel is the owner's process id.
	OwnerPIDLabel = "dev.zooid.owner.pid"
	// OwnerStartLabel is the owner's start time in clock ticks after boot (field
	// 22 of /proc/PID/stat): a pid the kernel has given to another process since
	// has another start time.
	OwnerStartLabel = "dev.zooid.owner.start"
	// OwnerBootLabel is the kernel's boot id (/proc/sys/kernel/random/boot_id): a
	// pid means nothing on another machine or after a reboot.
	OwnerBootLabel = "dev.zooid.owner.boot"
	// OwnerPIDNSLabel is the owner's pid namespace (the link /proc/self/ns/pid):
	// a process in a container sees other pids than the host.
	OwnerPIDNSLabel = "dev.zooid.owner.pidns"
)

// owner identifies a process across pid reuse, reboots and pid namespaces.
type owner struct {
	pid                int
	start, boot, pidns string
}

// selfOwner is this process as an owner; the zero owner when /proc can't say (then
// containers get no owner labels and are never swept).
func selfOwner() owner {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return owner{}
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return owner{}
	}
	pid := os.Getpid()
	start, err := startTime(pid)
	if err != nil {
		return owner{}
	}
	return owner{pid: pid, start: start, boot: strings.TrimSpace(string(boot)), pidns: ns}
}

// startTime is field 22 of /proc/pid/stat. The command name (field 2) may hold
// spaces and parentheses, so fields are counted after its closing parenthesis.
func startTime(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	if f[0] == "Z" {
		return "", fmt.Errorf("process %d is a zombie", pid)
	}
	return f[19], nil
}

// labels are the owner labels of a container o starts; none for the zero owner.
func (o owner) labels() map[string]string {
	if o.pid == 0 {
		return nil
	}
	return map[string]string{
		OwnerPIDLabel: strconv.Itoa(o.pid), OwnerStartLabel: o.start,
		OwnerBootLabel: o.boot, OwnerPIDNSLabel: o.pidns,
	}
}

// ownerOf reads a container's owner labels; ok is false when they are missing
// or incomplete.
func ownerOf(labels map[string]string) (owner, bool) {
	pid, err := strconv.Atoi(labels[OwnerPIDLabel])
	o := owner{pid: pid, start: labels[OwnerStartLabel], boot: labels[OwnerBootLabel], pidns: labels[OwnerPIDNSLabel]}
	if err != nil || pid <= 0 || o.start == "" || o.boot == "" || o.pidns == "" {
		return owner{}, false
	}
	return o, true
}

// gone says whether o has ended, as seen from here. Only an owner of this boot
// and pid namespace can be judged; any other is taken to be alive.
func (o owner) gone(here owner) bool {
	if here.pid == 0 || o.boot != here.boot || o.pidns != here.pidns {
		return false
	}
	start, err := startTime(o.pid)
	return err != nil || start != o.start
}

// Sweep removes the containers Run started (label dev.zooid.role=test-synapse)
// whose owner process has ended, running or not, and returns their ids. A
// container without owner labels, or owned by a process of another boot or pid
// namespace, is left alone: nothing here can tell whether its owner lives. Run
// calls it before it starts a container.
func Sweep(ctx context.Context) ([]string, error) {
	return sweep(ctx, selfOwner())
}

func sweep(ctx context.Context, here owner) ([]string, error) {
	if here.pid == 0 {
		return nil, nil
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("sweeping stale containers: connecting to the Docker engine: %w", err)
	}
	defer cli.Close()
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: client.Filters{}.Add("label", RoleLabel+"=test-synapse"),
	})
	if err != nil {
		return nil, fmt.Errorf("sweeping stale containers: listing them: %w", err)
	}
	var removed []string
	var errs []error
	for _, c := range res.Items {
		o, ok := ownerOf(c.Labels)
		if !ok || !o.gone(here) {
			continue
		}
		_, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		switch {
		case err == nil:
			removed = append(removed, c.ID)
		case errdefs.IsNotFound(err) || errdefs.IsConflict(err):
			// Another process's sweep got there first (gone, or its removal in progress).
		default:
			errs = append(errs, fmt.Errorf("removing container %.12s of ended process %d: %w", c.ID, o.pid, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("sweeping stale containers: %w", err)
	}
	return removed, nil
}

// PruneImages removes the images of repository repo (tags repo:*) that were
// created before the image keep, and returns the refs it removed. An image a
// container still uses is kept (the engine refuses; no force), and so is one
// created at the same time or after keep: another checkout may be using a newer
// one. keep's ancestors are kept too: a snapshot built on another snapshot
// needs the one below it tagged, or the next run would not find it by its key
// and rebuild the chain. It is how a rebuilt snapshot frees the disk its
// predecessors held.
func PruneImages(ctx context.Context, repo, keep string) ([]string, error) {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("pruning %s images: connecting to the Docker engine: %w", repo, err)
	}
	defer cli.Close()
	k, err := cli.ImageInspect(ctx, keep)
	if err != nil {
		return nil, fmt.Errorf("pruning %s images: inspecting %s: %w", repo, keep, err)
	}
	keepAt, err := time.Parse(time.RFC3339Nano, k.Created)
	if err != nil {
		return nil, fmt.Errorf("pruning %s images: %s's creation time %q: %w", repo, keep, k.Created, err)
	}
	hist, err := cli.ImageHistory(ctx, k.ID)
	if err != nil {
		return nil, fmt.Errorf("pruning %s images: the history of %s: %w", repo, keep, err)
	}
	ancestors := map[string]bool{}
	for _, h := range hist.Items {
		ancestors[h.ID] = true
	}
	res, err := cli.ImageList(ctx, client.ImageListOptions{Filters: client.Filters{}.Add("reference", repo)})
	if err != nil {
		return nil, fmt.Errorf("pruning %s images: listing them: %w", repo, err)
	}
	var removed []string
	var errs []error
	for _, img := range res.Items {
		if img.ID == k.ID || ancestors[img.ID] {
			continue
		}
		in, err := cli.ImageInspect(ctx, img.ID)
		if err != nil {
			if !errdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("inspecting %s: %w", img.ID, err))
			}
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, in.Created)
		if err != nil || !at.Before(keepAt) {
			continue
		}
		for _, tag := range img.RepoTags {
			if !strings.HasPrefix(tag, repo+":") {
				continue
			}
			_, err := cli.ImageRemove(ctx, tag, client.ImageRemoveOptions{PruneChildren: true})
			switch {
			case err == nil:
				removed = append(removed, tag)
			case errdefs.IsNotFound(err) || errdefs.IsConflict(err):
				// Gone already, or a container still uses it.
			default:
				errs = append(errs, fmt.Errorf("removing %s: %w", tag, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("pruning %s images: %w", repo, err)
	}
	return removed, nil
}
