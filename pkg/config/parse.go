package config

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/decreehq/decree/pkg/fsutil"
	"go.yaml.in/yaml/v3"
)

type parser struct {
	file  string
	cfg   *Config
	warns []Warning
	errs  []error
}

var topKeys = []string{"commands", "max_retries", "max_attempts", "max_depth", "max_log_bytes", "default_routine", "notebook_support",
	"notebook_engine", "on_migration_failure", "migrations_dir", "routine_source", "time_zone", "hooks",
	"routines", "shared_routines", "tree", "usage_limit", "prices", "parallel"}

var (
	commandKeys = []string{"router", "ai_interactive"}
	hookKeys    = []string{"beforeAll", "afterAll", "beforeEach", "afterEach", "onDeadLetter", "onWait", "beforeMerge", "afterMerge"}
	entryKeys   = []string{"enabled", "deprecated", "max_retries", "max_attempts", "timeout_s", "requires", "max_cost_usd", "attempts", "review"}
	treeKeys    = []string{"default_cli", "validate_cli", "retry_cli", "retry_count", "timeout_s", "clis"}
)

var yamlLineRe = regexp.MustCompile(`line (\d+): `)

func (p *parser) parse(data []byte) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		line := 1
		if m := yamlLineRe.FindStringSubmatchIndex(msg); m != nil {
			line, _ = strconv.Atoi(msg[m[2]:m[3]])
			msg = msg[:m[0]] + msg[m[1]:]
		}
		p.errs = append(p.errs, fmt.Errorf("%s:%d: invalid YAML: %s", p.file, line, msg))
		return
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		p.errorf(root, "config", describe(root), "a mapping of settings such as max_retries: 3")
		return
	}
	var retries, attempts *yaml.Node
	p.each(root, "", topKeys, func(key string, k, v *yaml.Node) {
		c := p.cfg
		switch key {
		case "commands":
			p.each(v, "commands", commandKeys, func(key string, _, v *yaml.Node) {
				switch key {
				case "router":
					c.Commands.Router, _ = p.str(v, "commands.router", "a shell command")
				case "ai_interactive":
					c.Commands.AIInteractive, _ = p.str(v, "commands.ai_interactive", "a shell command")
				}
			})
		case "max_retries":
			retries = v
			if n, ok := p.posInt(v, key); ok {
				c.MaxRetries = n
			}
		case "max_attempts":
			attempts = v
			if n, ok := p.posInt(v, key); ok {
				c.MaxRetries = n
			}
		case "max_depth":
			if n, ok := p.posInt(v, key); ok {
				c.MaxDepth = n
			}
		case "parallel":
			if n, ok := p.posInt(v, key); ok {
				c.Parallel = n
			}
		case "max_log_bytes":
			if n, ok := p.logBytes(v, key); ok {
				c.MaxLogBytes = n
			}
		case "default_routine":
			if s, ok := p.routineName(v, key); ok {
				c.DefaultRoutine = s
			}
		case "notebook_support":
			if b, ok := p.boolean(v, key); ok {
				c.NotebookSupport = b
			}
		case "notebook_engine":
			if s, ok := p.enum(v, key, NotebookEngines); ok {
				c.NotebookEngine = s
			}
		case "on_migration_failure":
			if s, ok := p.enum(v, key, MigrationFailureOps); ok {
				c.OnMigrationFailure = s
			}
		case "migrations_dir":
			if s, ok := p.str(v, key, "a relative path inside the project"); ok {
				clean := path.Clean(s)
				if err := fsutil.CheckRelPath(clean); err != nil {
					p.errorf(v, key, describe(v), "a relative path inside the project, such as specs")
				} else {
					c.MigrationsDir = clean
				}
			}
		case "routine_source":
			if s, ok := p.str(v, key, "a directory path"); ok {
				exp, err := expandHome(s)
				if err != nil {
					p.errs = append(p.errs, fmt.Errorf("%s:%d: routine_source: cannot expand ~ in %q: %v; give an absolute path", p.file, v.Line, s, err))
				} else {
					c.RoutineSource = exp
				}
			}
		case "time_zone":
			if s, ok := p.str(v, key, "an IANA zone name"); ok {
				if _, err := time.LoadLocation(s); err != nil || s == "" {
					p.errorf(v, key, describe(v), "an IANA zone name such as UTC or Europe/Berlin, or Local")
				} else {
					c.TimeZone = s
				}
			}
		case "hooks":
			p.each(v, "hooks", hookKeys, func(key string, _, v *yaml.Node) {
				// An empty value (or null) means "no hook".
				if v.Kind == yaml.ScalarNode && (v.Value == "" || v.ShortTag() == "!!null") {
					return
				}
				s, ok := p.routineName(v, "hooks."+key)
				if !ok {
					return
				}
				switch key {
				case "beforeAll":
					c.Hooks.BeforeAll = s
				case "afterAll":
					c.Hooks.AfterAll = s
				case "beforeEach":
					c.Hooks.BeforeEach = s
				case "afterEach":
					c.Hooks.AfterEach = s
				case "onDeadLetter":
					c.Hooks.OnDeadLetter = s
				case "onWait":
					c.Hooks.OnWait = s
				case "beforeMerge":
					c.Hooks.BeforeMerge = s
				case "afterMerge":
					c.Hooks.AfterMerge = s
				}
			})
		case "routines":
			p.registry(v, key, c.Routines)
		case "shared_routines":
			p.registry(v, key, c.SharedRoutines)
		case "tree":
			p.tree(v)
		case "usage_limit":
			p.usageLimit(v)
		case "prices":
			p.prices(v)
		}
	})
	p.checkAlias(retries, attempts, "max_retries", "max_attempts")
}

// each walks a mapping, reporting duplicate and non-text keys as errors and
// keys outside known as warnings; fn sees the known keys with non-null
// values. A null mapping is fine (nothing to walk).
func (p *parser) each(n *yaml.Node, where string, known []string, fn func(key string, k, v *yaml.Node)) {
	p.walk(n, where, known, false, fn)
}

// walk is each, optionally also calling fn for null values.
func (p *parser) walk(n *yaml.Node, where string, known []string, nulls bool, fn func(key string, k, v *yaml.Node)) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		allowed := "a mapping"
		if known != nil {
			allowed = "a mapping of " + strings.Join(known, ", ")
		}
		p.errorf(n, where, describe(n), allowed)
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		full := join(where, k.Value)
		if k.Kind != yaml.ScalarNode {
			p.errs = append(p.errs, fmt.Errorf("%s:%d: %s: a key must be plain text, found %s", p.file, k.Line, orRoot(where), describe(k)))
			continue
		}
		if prev, dup := seen[k.Value]; dup {
			p.errs = append(p.errs, fmt.Errorf("%s:%d: %s: given twice (also on line %d); keep one", p.file, k.Line, full, prev))
			continue
		}
		seen[k.Value] = k.Line
		if known != nil && !contains(known, k.Value) {
			msg := fmt.Sprintf("unknown key %s is ignored", full)
			if s := suggest(k.Value, known); s != "" {
				msg += fmt.Sprintf("; did you mean %s?", join(where, s))
			} else {
				msg += "; known keys here: " + strings.Join(known, ", ")
			}
			p.warns = append(p.warns, Warning{File: p.file, Line: k.Line, Msg: msg})
			continue
		}
		if isNull(v) && !nulls {
			continue
		}
		fn(k.Value, k, v)
	}
}

// registry reads routines: or shared_routines:.
func (p *parser) registry(n *yaml.Node, where string, into map[string]RoutineSettings) {
	// A bare "name:" (null value) still registers the routine.
	p.walk(n, where, nil, true, func(name string, k, v *yaml.Node) {
		if err := fsutil.CheckName("routine", name); err != nil {
			p.errs = append(p.errs, fmt.Errorf("%s:%d: %s: %v", p.file, k.Line, where, err))
			return
		}
		into[name] = p.entry(v, where+"."+name)
	})
}

func (p *parser) entry(n *yaml.Node, where string) RoutineSettings {
	var s RoutineSettings
	var retries, attempts *yaml.Node
	p.each(n, where, entryKeys, func(key string, _, v *yaml.Node) {
		full := where + "." + key
		switch key {
		case "enabled":
			if b, ok := p.boolean(v, full); ok {
				s.Enabled = &b
			}
		case "deprecated":
			if b, ok := p.boolean(v, full); ok {
				s.Deprecated = b
			}
		case "max_retries", "max_attempts":
			if key == "max_retries" {
				retries = v
			} else {
				attempts = v
			}
			if n, ok := p.posInt(v, full); ok {
				s.MaxRetries = n
			}
		case "timeout_s":
			if n, ok := p.posInt(v, full); ok {
				s.TimeoutS = n
			}
		case "review":
			if b, ok := p.boolean(v, full); ok {
				s.Review = b
			}
		case "requires":
			p.each(v, full, nil, func(label string, _, lv *yaml.Node) {
				val, ok := p.str(lv, full+"."+label, "a label value")
				if !ok {
					return
				}
				if s.Requires == nil {
					s.Requires = map[string]string{}
				}
				s.Requires[label] = val
			})
		case "max_cost_usd":
			if f, ok := p.dollars(v, full); ok {
				s.MaxCostUSD = f
			}
		case "attempts":
			s.Attempts = p.attemptValues(v, full)
		}
	})
	p.checkAlias(retries, attempts, where+".max_retries", where+".max_attempts")
	p.checkAttempts(s, retries, attempts, where)
	return s
}

func (p *parser) tree(n *yaml.Node) {
	t := &p.cfg.Tree
	var validateSet, retrySet bool
	type cliRef struct {
		node *yaml.Node
		key  string
		dst  *string
	}
	var refs []cliRef
	p.each(n, "tree", treeKeys, func(key string, _, v *yaml.Node) {
		full := "tree." + key
		switch key {
		case "default_cli", "validate_cli", "retry_cli":
			s, ok := p.str(v, full, "a CLI codename")
			if !ok {
				return
			}
			dst := map[string]*string{"default_cli": &t.DefaultCLI, "validate_cli": &t.ValidateCLI, "retry_cli": &t.RetryCLI}[key]
			*dst = strings.ToUpper(s)
			validateSet = validateSet || key == "validate_cli"
			retrySet = retrySet || key == "retry_cli"
			refs = append(refs, cliRef{v, full, dst})
		case "retry_count":
			if n, ok := p.nonNegInt(v, full); ok {
				t.RetryCount = n
			}
		case "timeout_s":
			if n, ok := p.posInt(v, full); ok {
				t.TimeoutS = n
			}
		case "clis":
			p.each(v, full, nil, func(code string, _, cv *yaml.Node) {
				tmpl, ok := p.str(cv, full+"."+code, "a command line containing "+PromptPlaceholder)
				if !ok {
					return
				}
				if !strings.Contains(tmpl, PromptPlaceholder) {
					p.errorf(cv, full+"."+code, describe(cv), "a command line containing "+PromptPlaceholder)
					return
				}
				t.CLIs[strings.ToUpper(code)] = tmpl
			})
		}
	})
	if !validateSet {
		t.ValidateCLI = t.DefaultCLI
	}
	if !retrySet {
		t.RetryCLI = t.DefaultCLI
	}
	codes := make([]string, 0, len(t.CLIs))
	for c := range t.CLIs {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	for _, r := range refs {
		if _, ok := t.CLIs[*r.dst]; !ok {
			p.errorf(r.node, r.key, describe(r.node), strings.Join(codes, ", ")+" (or a codename added under tree.clis)")
		}
	}
}

func (p *parser) checkAlias(retries, attempts *yaml.Node, rKey, aKey string) {
	if retries == nil || attempts == nil || retries.Value == attempts.Value {
		return
	}
	p.errs = append(p.errs, fmt.Errorf("%s:%d: %s (line %d) is %s but %s (line %d) is %s; they are the same setting, keep one",
		p.file, attempts.Line, rKey, retries.Line, retries.Value, aKey, attempts.Line, attempts.Value))
}

// errorf records "FILE:LINE: key: got X, allowed: ...".
func (p *parser) errorf(n *yaml.Node, key, got, allowed string) {
	p.errs = append(p.errs, fmt.Errorf("%s:%d: %s: got %s, allowed: %s", p.file, n.Line, key, got, allowed))
}

func (p *parser) str(n *yaml.Node, key, allowed string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!bool" {
		p.errorf(n, key, describe(n), allowed)
		return "", false
	}
	return n.Value, true
}

func (p *parser) routineName(n *yaml.Node, key string) (string, bool) {
	s, ok := p.str(n, key, "a routine name")
	if !ok {
		return "", false
	}
	if err := fsutil.CheckName("routine", s); err != nil {
		p.errorf(n, key, describe(n), "a routine name without '/', '\\', '..' or control characters")
		return "", false
	}
	return s, true
}

func (p *parser) intValue(n *yaml.Node) (int, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		return 0, false
	}
	var v int
	if err := n.Decode(&v); err != nil {
		return 0, false
	}
	return v, true
}

func (p *parser) posInt(n *yaml.Node, key string) (int, bool) {
	v, ok := p.intValue(n)
	if !ok || v <= 0 {
		p.errorf(n, key, describe(n), "a whole number above 0")
		return 0, false
	}
	return v, true
}

func (p *parser) nonNegInt(n *yaml.Node, key string) (int, bool) {
	v, ok := p.intValue(n)
	if !ok || v < 0 {
		p.errorf(n, key, describe(n), "a whole number, 0 or more")
		return 0, false
	}
	return v, true
}

func (p *parser) boolean(n *yaml.Node, key string) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		p.errorf(n, key, describe(n), "true, false")
		return false, false
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		p.errorf(n, key, describe(n), "true, false")
		return false, false
	}
	return b, true
}

func (p *parser) enum(n *yaml.Node, key string, allowed []string) (string, bool) {
	if n.Kind != yaml.ScalarNode || !contains(allowed, n.Value) {
		p.errorf(n, key, describe(n), strings.Join(allowed, ", "))
		return "", false
	}
	return n.Value, true
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names a node's value for an error message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias (*" + n.Value + ")"
	}
	if n.Value == "" || strings.ContainsAny(n.Value, " \t\n,:") {
		return strconv.Quote(n.Value)
	}
	return n.Value
}

func join(where, key string) string {
	if where == "" {
		return key
	}
	return where + "." + key
}

func orRoot(where string) string {
	if where == "" {
		return "config"
	}
	return where
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// suggest finds a known key that differs only in case, '_' or '-'.
func suggest(key string, known []string) string {
	canon := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	for _, k := range known {
		if canon(k) == canon(key) {
			return k
		}
	}
	return ""
}
