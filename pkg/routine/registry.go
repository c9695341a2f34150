package routine

import (
	"sort"

	"github.com/decreehq/decree/pkg/config"
)

// SyncReport tells what Sync changed in the registry.
type SyncReport struct {
	// Routines and Shared are the updated registries (the maps passed in,
	// or new maps when nil was passed). Write them back with
	// config.WriteRegistry.
	Routines map[string]config.RoutineSettings
	Shared   map[string]config.RoutineSettings
	// Added lists new project routines (registered enabled).
	Added []string
	// AddedShared lists new shared routines (registered disabled).
	AddedShared []string
	// Deprecated lists registry entries whose files disappeared
	// ("shared:" prefix for shared ones).
	Deprecated []string
	// Restored lists deprecated entries whose files came back.
	Restored []string
}

// Changed reports whether Sync modified anything.
func (r SyncReport) Changed() bool {
	return len(r.Added)+len(r.AddedShared)+len(r.Deprecated)+len(r.Restored) > 0
}

// Sync brings the routine registries in line with the files on disk: a new
// project routine is added enabled, a new shared routine is added disabled
// (explicitly, so the file shows the choice), an entry whose file vanished is
// marked deprecated, and a deprecated entry whose file is back loses the
// mark. Other settings (enabled, max_retries, timeout_s, requires) are kept.
// The maps are updated in place (allocated when nil) and returned in the
// report. Shared routines are tracked even when a project routine of the
// same name shadows them.
//
// An error listing a directory leaves both maps untouched, so a transient
// failure cannot deprecate every routine.
func Sync(lib Library, routines, shared map[string]config.RoutineSettings) (SyncReport, error) {
	proj, err := lib.ListProject()
	if err != nil {
		return SyncReport{Routines: routines, Shared: shared}, err
	}
	sh, err := lib.ListShared()
	if err != nil {
		return SyncReport{Routines: routines, Shared: shared}, err
	}
	if routines == nil {
		routines = map[string]config.RoutineSettings{}
	}
	if shared == nil {
		shared = map[string]config.RoutineSettings{}
	}
	rep := SyncReport{Routines: routines, Shared: shared}
	syncOne(routines, proj, true, "", &rep.Added, &rep)
	syncOne(shared, sh, false, "shared:", &rep.AddedShared, &rep)
	sort.Strings(rep.Added)
	sort.Strings(rep.AddedShared)
	sort.Strings(rep.Deprecated)
	sort.Strings(rep.Restored)
	return rep, nil
}

func syncOne(reg map[string]config.RoutineSettings, present []Entry, enable bool, prefix string, added *[]string, rep *SyncReport) {
	onDisk := make(map[string]bool, len(present))
	for _, e := range present {
		onDisk[e.Name] = true
		s, ok := reg[e.Name]
		if !ok {
			v := enable
			reg[e.Name] = config.RoutineSettings{Enabled: &v}
			*added = append(*added, e.Name)
			continue
		}
		if s.Deprecated {
			s.Deprecated = false
			reg[e.Name] = s
			rep.Restored = append(rep.Restored, prefix+e.Name)
		}
	}
	for name, s := range reg {
		if !onDisk[name] && !s.Deprecated {
			s.Deprecated = true
			reg[name] = s
			rep.Deprecated = append(rep.Deprecated, prefix+name)
		}
	}
}

// Enabled reports whether a resolved routine may be selected according to
// the registries: project routines default to enabled, shared ones to
// disabled, and deprecated entries are never enabled. Hooks do not consult
// the registry.
func Enabled(r Routine, routines, shared map[string]config.RoutineSettings) bool {
	if r.Shared {
		s, ok := shared[r.Name]
		return ok && !s.Deprecated && s.IsEnabled(false)
	}
	s := routines[r.Name]
	return !s.Deprecated && s.IsEnabled(true)
}
