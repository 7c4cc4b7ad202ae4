package lockgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests in this file drive Node tools pinned in .ci/node/package.json:
// ajv (the JSON Schema validator most editors and CI linters use) and
// yaml-language-server (what VS Code's YAML extension and other editors
// run). They skip only when node is missing and CI is unset; they install
// the tools themselves with npm ci the first time.

var (
	nodeOnce sync.Once
	nodeErr  string
)

// nodeTools returns the directory holding the tools' node_modules.
func nodeTools(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is not installed, and CI is set: install nodejs and npm (.ci/run does)")
		}
		t.Skip("node is not installed (these checks run under CI)")
	}
	dir, err := filepath.Abs(filepath.Join(".ci", "node"))
	if err != nil {
		t.Fatal(err)
	}
	nodeOnce.Do(func() {
		lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
		if err != nil {
			nodeErr = err.Error()
			return
		}
		// node_modules/.package-lock.json is npm's record of what it
		// installed: equal to the lock file's packages, nothing to do.
		installed, _ := os.ReadFile(filepath.Join(dir, "node_modules", ".package-lock.json"))
		if sameInstall(lock, installed) {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			nodeErr = "npm ci in .ci/node: " + err.Error() + "\n" + string(out)
		}
	})
	if nodeErr != "" {
		t.Fatal(nodeErr)
	}
	return dir
}

// sameInstall reports whether npm's record of an install matches the lock.
func sameInstall(lock, installed []byte) bool {
	var a, b struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if json.Unmarshal(lock, &a) != nil || json.Unmarshal(installed, &b) != nil || len(b.Packages) == 0 {
		return false
	}
	for name, p := range a.Packages {
		if name == "" {
			continue
		}
		if b.Packages[name].Version != p.Version {
			return false
		}
	}
	return true
}

// TestSchemaPassesAjvStrictModeAndAgrees compiles the schema with ajv in
// strict mode, which must log and throw nothing, and checks that ajv gives
// every spec (see allSpecs) the verdict the Go validator gives.
func TestSchemaPassesAjvStrictModeAndAgrees(t *testing.T) {
	dir := nodeTools(t)
	sch := compiledSchema(t)
	instances := map[string]any{}
	want := map[string]bool{}
	for _, c := range allSpecs(t) {
		inst, ok := asJSON(t, c.src)
		if !ok {
			continue
		}
		instances[c.name] = inst
		want[c.name] = sch.Validate(inst) == nil
	}
	input, err := json.Marshal(map[string]any{"schema": json.RawMessage(Schema), "instances": instances})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join(dir, "ajv-check.mjs"))
	cmd.Stdin = bytes.NewReader(input)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ajv-check: %v\n%s", err, stderr.String())
	}
	var got struct {
		Warnings []string        `json:"warnings"`
		Valid    map[string]bool `json:"valid"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, w := range got.Warnings {
		t.Errorf("ajv strict mode: %s", w)
	}
	if len(got.Valid) != len(want) {
		t.Fatalf("ajv checked %d specs, want %d", len(got.Valid), len(want))
	}
	for name, v := range want {
		if got.Valid[name] != v {
			t.Errorf("%s: ajv says valid=%v, the Go validator %v", name, got.Valid[name], v)
		}
	}
}

// lsp is a minimal Language Server Protocol client over a server's stdio.
type lsp struct {
	t      *testing.T
	in     io.WriteCloser
	mu     sync.Mutex
	nextID int
	calls  map[int]chan json.RawMessage
	diags  map[string][]lspDiagnostic // latest publishDiagnostics per uri
	notify chan struct{}              // a publishDiagnostics arrived
	config map[string]any             // answers to workspace/configuration
}

type lspDiagnostic struct {
	Message string `json:"message"`
	Range   struct {
		Start struct{ Line, Character int } `json:"start"`
	} `json:"range"`
}

func startLSP(t *testing.T, cmd *exec.Cmd, config map[string]any) *lsp {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &lsp{t: t, in: in, calls: map[int]chan json.RawMessage{}, diags: map[string][]lspDiagnostic{}, notify: make(chan struct{}, 100), config: config}
	t.Cleanup(func() {
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})
	go c.read(bufio.NewReader(out))
	return c
}

func (c *lsp) send(msg map[string]any) {
	msg["jsonrpc"] = "2.0"
	body, err := json.Marshal(msg)
	if err != nil {
		c.t.Error(err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.in, "Content-Length: %d\r\n\r\n%s", len(body), body)
}

// call sends a request and waits for its result.
func (c *lsp) call(method string, params any) json.RawMessage {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan json.RawMessage, 1)
	c.calls[id] = ch
	c.mu.Unlock()
	c.send(map[string]any{"id": id, "method": method, "params": params})
	select {
	case res := <-ch:
		return res
	case <-time.After(30 * time.Second):
		c.t.Fatalf("no reply to %s", method)
		return nil
	}
}

func (c *lsp) notifyServer(method string, params any) {
	c.send(map[string]any{"method": method, "params": params})
}

func (c *lsp) read(r *bufio.Reader) {
	for {
		n := 0
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSpace(line)
			if line == "" {
				break
			}
			if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
				n, _ = strconv.Atoi(v)
			}
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		var msg struct {
			ID     *json.RawMessage `json:"id"`
			Method string           `json:"method"`
			Params json.RawMessage  `json:"params"`
			Result json.RawMessage  `json:"result"`
		}
		if json.Unmarshal(body, &msg) != nil {
			continue
		}
		switch {
		case msg.Method != "" && msg.ID != nil: // a request from the server
			c.answer(*msg.ID, msg.Method, msg.Params)
		case msg.Method == "textDocument/publishDiagnostics":
			var p struct {
				URI         string          `json:"uri"`
				Diagnostics []lspDiagnostic `json:"diagnostics"`
			}
			if json.Unmarshal(msg.Params, &p) == nil {
				c.mu.Lock()
				c.diags[p.URI] = p.Diagnostics
				c.mu.Unlock()
				c.notify <- struct{}{}
			}
		case msg.ID != nil:
			var id int
			json.Unmarshal(*msg.ID, &id)
			c.mu.Lock()
			ch := c.calls[id]
			c.mu.Unlock()
			if ch != nil {
				ch <- msg.Result
			}
		}
	}
}

// answer replies to the server's requests: its configuration sections
// from c.config, null to anything else.
func (c *lsp) answer(id json.RawMessage, method string, params json.RawMessage) {
	var result any
	if method == "workspace/configuration" {
		var p struct {
			Items []struct {
				Section string `json:"section"`
			} `json:"items"`
		}
		json.Unmarshal(params, &p)
		items := make([]any, len(p.Items))
		for i, it := range p.Items {
			items[i] = c.config[it.Section]
		}
		result = items
	}
	c.send(map[string]any{"id": id, "result": result})
}

// waitDiagnostics waits until the diagnostics published for uri satisfy ok.
func (c *lsp) waitDiagnostics(uri string, ok func([]lspDiagnostic) bool) []lspDiagnostic {
	c.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		c.mu.Lock()
		d, published := c.diags[uri]
		c.mu.Unlock()
		if published && ok(d) {
			return d
		}
		select {
		case <-c.notify:
		case <-deadline:
			c.t.Fatalf("diagnostics of %s never came (last: %+v)", uri, d)
		}
	}
}

// TestYAMLLanguageServerUsesTheSchemaBesideTheSpec runs lockgen init in an
// empty directory and opens specs there in the real yaml-language-server,
// with every network request sent to a proxy that does not exist: the
// relative modeline must give it the schema offline. It checks that the
// server reports the mistakes the schema knows, reports nothing in the
// starter, and completes lock fields from the schema.
func TestYAMLLanguageServerUsesTheSchemaBesideTheSpec(t *testing.T) {
	tools := nodeTools(t)
	dir := t.TempDir()
	spec := filepath.Join(dir, "locks.yaml")
	init := exec.Command("go", "run", "./cmd/lockgen", "init", "-config", spec)
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("lockgen init: %v\n%s", err, out)
	}
	starter, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(starter, []byte("# yaml-language-server: $schema=locks.schema.json\n")) {
		t.Fatalf("the starter does not start with the relative modeline:\n%s", starter)
	}

	const deadProxy = "http://127.0.0.1:9"
	server := exec.Command("node", filepath.Join(tools, "node_modules", "yaml-language-server", "bin", "yaml-language-server"), "--stdio")
	server.Env = append(os.Environ(), "HTTP_PROXY="+deadProxy, "HTTPS_PROXY="+deadProxy, "http_proxy="+deadProxy, "https_proxy="+deadProxy, "NO_PROXY=", "no_proxy=")
	yamlSettings := map[string]any{"validate": true, "completion": true, "hover": true, "schemaStore": map[string]any{"enable": false}, "schemas": map[string]any{}}
	c := startLSP(t, server, map[string]any{"yaml": yamlSettings, "http": map[string]any{"proxy": deadProxy, "proxyStrictSSL": false}})
	root := "file://" + dir
	c.call("initialize", map[string]any{
		"processId": os.Getpid(), "rootUri": root,
		"workspaceFolders": []any{map[string]any{"uri": root, "name": "w"}},
		"capabilities": map[string]any{
			"workspace":    map[string]any{"configuration": true},
			"textDocument": map[string]any{"completion": map[string]any{"completionItem": map[string]any{"snippetSupport": false}}, "publishDiagnostics": map[string]any{}},
		},
	})
	c.notifyServer("initialized", map[string]any{})
	c.notifyServer("workspace/didChangeConfiguration", map[string]any{"settings": map[string]any{"yaml": yamlSettings, "http": map[string]any{"proxy": deadProxy}}})

	open := func(name, text string) string {
		uri := root + "/" + name
		c.notifyServer("textDocument/didOpen", map[string]any{"textDocument": map[string]any{"uri": uri, "languageId": "yaml", "version": 1, "text": text}})
		return uri
	}
	bad := open("bad.yaml", "# yaml-language-server: $schema=locks.schema.json\nversion: \"1\"\npackage: locks\nlocks:\n  OrderLock:\n    key: \"order:${id}\"\n    waittime: 3s\n")
	diags := c.waitDiagnostics(bad, func(d []lspDiagnostic) bool { return len(d) > 0 })
	var msgs []string
	for _, d := range diags {
		msgs = append(msgs, fmt.Sprintf("%d: %s", d.Range.Start.Line+1, d.Message))
	}
	all := strings.Join(msgs, "\n")
	t.Logf("diagnostics of the bad spec:\n%s", all)
	for _, want := range []string{"2: ", "7: "} {
		if !strings.Contains(all, want) {
			t.Errorf("no diagnostic on line %s of the bad spec; got:\n%s", strings.TrimSuffix(want, ": "), all)
		}
	}
	if !strings.Contains(all, "waittime") {
		t.Errorf("the unknown field waittime is not reported; got:\n%s", all)
	}

	good := open("locks.yaml", string(starter))
	c.notifyServer("textDocument/didChange", map[string]any{"textDocument": map[string]any{"uri": good, "version": 2}, "contentChanges": []any{map[string]any{"text": string(starter)}}})
	c.waitDiagnostics(good, func(d []lspDiagnostic) bool {
		for _, x := range d {
			t.Errorf("the starter has a diagnostic: line %d: %s", x.Range.Start.Line+1, x.Message)
		}
		return true
	})

	// Completion inside a lock offers the lock fields the schema declares.
	text := "# yaml-language-server: $schema=locks.schema.json\nversion: 1\npackage: locks\nlocks:\n  OrderLock:\n    key: a\n    \n"
	uri := open("complete.yaml", text)
	res := c.call("textDocument/completion", map[string]any{"textDocument": map[string]any{"uri": uri}, "position": map[string]any{"line": 6, "character": 4}})
	var list struct {
		Items []struct {
			Label string `json:"label"`
		} `json:"items"`
	}
	if err := json.Unmarshal(res, &list); err != nil || len(list.Items) == 0 {
		if err := json.Unmarshal(res, &list.Items); err != nil {
			t.Fatalf("completion result %s: %v", res, err)
		}
	}
	labels := map[string]bool{}
	for _, it := range list.Items {
		labels[it.Label] = true
	}
	t.Logf("completion inside a lock: %d items", len(labels))
	for _, want := range []string{"waitTime", "quorum", "fairness", "slot"} {
		if !labels[want] {
			t.Errorf("completion inside a lock lacks %s; got %v", want, labels)
		}
	}
	c.call("shutdown", nil)
	c.notifyServer("exit", nil)
}
