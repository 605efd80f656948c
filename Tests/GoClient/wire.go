package main

// What the daemon really sent. The varlink Go library behind the generated bindings decodes a
// reply's parameters with json.Unmarshal and drops its error, so a reply that does not fit the
// generated types comes back as zero values and no error. To notice that, the client talks to
// quaked through a small in-process proxy that keeps a copy of every message the daemon sends;
// each reply is then checked against the interface description (every required field present,
// no unknown field, the right JSON type, enum values from the enum), and the values the
// bindings returned must re-encode to the same JSON (nothing lost in decoding).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/varlink/go/varlink/idl"
)

// recorder keeps the NUL-terminated messages one proxied connection received from the daemon.
type recorder struct {
	mu      sync.Mutex
	frames  [][]byte
	partial []byte
	dialErr error
}

func (r *recorder) add(chunk []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partial = append(r.partial, chunk...)
	for {
		i := bytes.IndexByte(r.partial, 0)
		if i < 0 {
			return
		}
		frame := make([]byte, i)
		copy(frame, r.partial[:i])
		r.frames = append(r.frames, frame)
		r.partial = r.partial[i+1:]
	}
}

// next returns the oldest message not returned yet, if any. The bindings read replies in the
// order they came, and each was recorded before it was forwarded, so when the bindings have
// read a reply, next returns that same reply.
func (r *recorder) next() ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.frames) == 0 {
		return nil, false
	}
	frame := r.frames[0]
	r.frames = r.frames[1:]
	return frame, true
}

// pending is how many messages were received and not returned yet.
func (r *recorder) pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.frames)
}

// proxy listens on a private socket and forwards each connection to the daemon's socket.
type proxy struct {
	dir      string
	path     string
	target   string
	listener net.Listener
	accepted chan *recorder
}

func newProxy(target string) (*proxy, error) {
	dir, err := os.MkdirTemp("", "quaked-go-client.")
	if err != nil {
		return nil, err
	}
	p := &proxy{dir: dir, path: filepath.Join(dir, "proxy.sock"), target: target, accepted: make(chan *recorder, 16)}
	p.listener, err = net.Listen("unix", p.path)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go p.serve()
	return p, nil
}

func (p *proxy) serve() {
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return
		}
		rec := &recorder{}
		server, err := net.DialTimeout("unix", p.target, 10*time.Second)
		if err != nil {
			rec.dialErr = err
			client.Close()
			p.accepted <- rec
			continue
		}
		p.accepted <- rec
		go func() {
			io.Copy(server, client)
			server.Close()
			client.Close()
		}()
		go func() {
			buf := make([]byte, 64*1024)
			for {
				n, err := server.Read(buf)
				if n > 0 {
					// Recorded before it is forwarded: by the time the bindings have read a
					// reply, its copy is here.
					rec.add(buf[:n])
					if _, werr := client.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			server.Close()
			client.Close()
		}()
	}
}

func (p *proxy) next() (*recorder, error) {
	select {
	case rec := <-p.accepted:
		if rec.dialErr != nil {
			return nil, rec.dialErr
		}
		return rec, nil
	case <-time.After(10 * time.Second):
		return nil, fmt.Errorf("the proxy accepted no connection")
	}
}

func (p *proxy) close() {
	p.listener.Close()
	os.RemoveAll(p.dir)
}

// frame is one reply message as sent: parameters, continues, error.
type frame struct {
	params    json.RawMessage
	continues bool
	err       string
}

func parseFrame(raw []byte) (frame, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return frame{}, fmt.Errorf("reply is not a JSON object: %v: %.200s", err, raw)
	}
	var f frame
	for key, value := range top {
		switch key {
		case "parameters":
			if string(value) != "null" {
				f.params = value
			}
		case "continues":
			if err := json.Unmarshal(value, &f.continues); err != nil {
				return frame{}, fmt.Errorf("reply's continues is not a bool: %s", value)
			}
		case "error":
			if err := json.Unmarshal(value, &f.err); err != nil || f.err == "" {
				return frame{}, fmt.Errorf("reply's error is not a name: %s", value)
			}
		default:
			return frame{}, fmt.Errorf("reply has an unknown member %q", key)
		}
	}
	return f, nil
}

// schema checks JSON values against the types of one interface description.
type schema struct {
	iface   *idl.IDL
	aliases map[string]*idl.Type
}

func newSchema(description string) (*schema, error) {
	iface, err := idl.New(description)
	if err != nil {
		return nil, err
	}
	s := &schema{iface: iface, aliases: map[string]*idl.Type{}}
	for _, a := range iface.Aliases {
		s.aliases[a.Name] = a.Type
	}
	return s, nil
}

func (s *schema) method(name string) *idl.Method {
	for _, m := range s.iface.Methods {
		if m.Name == name {
			return m
		}
	}
	return nil
}

func (s *schema) errorType(name string) *idl.Type {
	for _, e := range s.iface.Errors {
		if s.iface.Name+"."+e.Name == name {
			return e.Type
		}
	}
	return nil
}

// checkParams checks a message's parameters (absent means {}) against a struct type.
func (s *schema) checkParams(t *idl.Type, raw json.RawMessage) error {
	if raw == nil {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v interface{}
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("parameters are not JSON: %v", err)
	}
	return s.check("parameters", t, v)
}

func (s *schema) check(path string, t *idl.Type, v interface{}) error {
	switch t.Kind {
	case idl.TypeBool:
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: want bool, got %s", path, describe(v))
		}
	case idl.TypeInt:
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Errorf("%s: want int, got %s", path, describe(v))
		}
		if _, err := n.Int64(); err != nil {
			return fmt.Errorf("%s: want int, got %s", path, n)
		}
	case idl.TypeFloat:
		if _, ok := v.(json.Number); !ok {
			return fmt.Errorf("%s: want float, got %s", path, describe(v))
		}
	case idl.TypeString:
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: want string, got %s", path, describe(v))
		}
	case idl.TypeObject:
		if v == nil {
			return fmt.Errorf("%s: want object, got null", path)
		}
	case idl.TypeMaybe:
		if v == nil {
			return nil
		}
		return s.check(path, t.ElementType, v)
	case idl.TypeArray:
		a, ok := v.([]interface{})
		if !ok {
			return fmt.Errorf("%s: want array, got %s", path, describe(v))
		}
		for i, e := range a {
			if err := s.check(fmt.Sprintf("%s[%d]", path, i), t.ElementType, e); err != nil {
				return err
			}
		}
	case idl.TypeMap:
		m, ok := v.(map[string]interface{})
		if !ok {
			return fmt.Errorf("%s: want map, got %s", path, describe(v))
		}
		for k, e := range m {
			if err := s.check(fmt.Sprintf("%s[%q]", path, k), t.ElementType, e); err != nil {
				return err
			}
		}
	case idl.TypeEnum:
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s: want enum value, got %s", path, describe(v))
		}
		names := make([]string, len(t.Fields))
		for i, f := range t.Fields {
			if f.Name == str {
				return nil
			}
			names[i] = f.Name
		}
		return fmt.Errorf("%s: %q is not one of (%s)", path, str, strings.Join(names, ", "))
	case idl.TypeStruct:
		m, ok := v.(map[string]interface{})
		if !ok {
			return fmt.Errorf("%s: want object, got %s", path, describe(v))
		}
		known := map[string]bool{}
		for _, f := range t.Fields {
			known[f.Name] = true
			e, present := m[f.Name]
			if !present || e == nil {
				if f.Type.Kind != idl.TypeMaybe {
					return fmt.Errorf("%s.%s: required, but %s", path, f.Name, map[bool]string{false: "absent", true: "null"}[present])
				}
				continue
			}
			if err := s.check(path+"."+f.Name, f.Type, e); err != nil {
				return err
			}
		}
		var unknown []string
		for k := range m {
			if !known[k] {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			sort.Strings(unknown)
			return fmt.Errorf("%s: members not in the interface: %s", path, strings.Join(unknown, ", "))
		}
	case idl.TypeAlias:
		a, ok := s.aliases[t.Alias]
		if !ok {
			return fmt.Errorf("%s: the interface has no type %s", path, t.Alias)
		}
		return s.check(path, a, v)
	default:
		return fmt.Errorf("%s: unsupported type kind %d", path, t.Kind)
	}
	return nil
}

func describe(v interface{}) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case json.Number:
		return "number " + x.String()
	case string:
		return "string"
	case []interface{}:
		return "array"
	case map[string]interface{}:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// sameJSON reports where the JSON the bindings' values encode to differs from what was sent.
// Nulls count as absent on both sides (the generated types leave out nil optionals).
func sameJSON(raw json.RawMessage, decoded interface{}) error {
	if raw == nil {
		raw = json.RawMessage("{}")
	}
	encoded, err := json.Marshal(decoded)
	if err != nil {
		return fmt.Errorf("the decoded values do not encode: %v", err)
	}
	var sent, got interface{}
	if err := json.Unmarshal(raw, &sent); err != nil {
		return err
	}
	if err := json.Unmarshal(encoded, &got); err != nil {
		return err
	}
	return diff("parameters", dropNulls(sent), dropNulls(got))
}

func dropNulls(v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		for k, e := range x {
			if e == nil {
				delete(x, k)
			} else {
				x[k] = dropNulls(e)
			}
		}
	case []interface{}:
		for i, e := range x {
			x[i] = dropNulls(e)
		}
	}
	return v
}

func diff(path string, sent, got interface{}) error {
	switch s := sent.(type) {
	case map[string]interface{}:
		g, ok := got.(map[string]interface{})
		if !ok {
			return fmt.Errorf("%s: sent an object, decoded %s", path, short(got))
		}
		for k, e := range s {
			ge, ok := g[k]
			if !ok {
				return fmt.Errorf("%s.%s: sent %s, lost in decoding", path, k, short(e))
			}
			if err := diff(path+"."+k, e, ge); err != nil {
				return err
			}
		}
		for k, e := range g {
			if _, ok := s[k]; !ok {
				return fmt.Errorf("%s.%s: not sent, decoded %s", path, k, short(e))
			}
		}
		return nil
	case []interface{}:
		g, ok := got.([]interface{})
		if !ok || len(g) != len(s) {
			return fmt.Errorf("%s: sent %s, decoded %s", path, short(sent), short(got))
		}
		for i := range s {
			if err := diff(fmt.Sprintf("%s[%d]", path, i), s[i], g[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if !reflect.DeepEqual(sent, got) {
		return fmt.Errorf("%s: sent %s, decoded %s", path, short(sent), short(got))
	}
	return nil
}

func short(v interface{}) string {
	b, _ := json.Marshal(v)
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

// The standard org.varlink.service interface (as varlink.org and systemd define it), for
// checking GetInfo, GetInterfaceDescription and the service errors (PermissionDenied).
const orgVarlinkService = `# The Varlink Service Interface is provided by every varlink service. It
# describes the service and the interfaces it implements.
interface org.varlink.service

# Get a list of all the interfaces a service provides and information
# about the implementation.
method GetInfo() -> (
  vendor: string,
  product: string,
  version: string,
  url: string,
  interfaces: []string
)

# Get the description of an interface that is implemented by this service.
method GetInterfaceDescription(interface: string) -> (description: string)

# The requested interface was not found.
error InterfaceNotFound (interface: string)

# The requested method was not found
error MethodNotFound (method: string)

# The interface defines the requested method, but the service does not
# implement it.
error MethodNotImplemented (method: string)

# One of the passed parameters is invalid.
error InvalidParameter (parameter: string)

# Client is denied access
error PermissionDenied ()

# Method is expected to be called with 'more' set to true, but wasn't
error ExpectedMore ()
`
