package ignore

import (
	"io/fs"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirHandle is an open directory: a raw descriptor, which avoids the
// poller registration and fcntl calls os.Open makes for every directory.
type dirHandle struct {
	fd    int
	path  string
	slab  []statInfo
	nstat int    // entries that may need lstat: the slab's size
	cname []byte // NUL-terminated name for fstatat, reused
	sc    *scratch
}

// scratch is memory one walker reuses from directory to directory: the
// FileInfos of a directory are then valid only until the next one is read.
type scratch struct {
	slab  []statInfo
	cname []byte
}

// dirEntry is one directory entry; name is the tail of rel.
type dirEntry struct {
	name string
	rel  string      // prefix + name
	typ  fs.FileMode // type bits only; modeUnknown when the file system does not say
}

const modeUnknown = fs.ModeIrregular

// openDir opens a directory; with sc set, its FileInfos live in sc.
func openDir(path string, sc *scratch) (*dirHandle, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	d := &dirHandle{fd: fd, path: path, sc: sc}
	if sc != nil {
		d.cname = sc.cname
	}
	return d, nil
}

func (d *dirHandle) close() {
	unix.Close(d.fd)
	if d.sc != nil {
		d.sc.cname = d.cname
	}
}

// entries reads the whole directory with getdents64. Each entry's rel is
// prefix+name; all of them share one allocation.
func (d *dirHandle) entries(prefix string) ([]dirEntry, error) {
	var out []dirEntry
	var endsBuf [64]int
	ends := endsBuf[:0]
	var arena []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(d.fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "readdir", Path: d.path, Err: err}
		}
		if n <= 0 {
			break
		}
		b := buf[:n]
		for len(b) >= 19 {
			// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name
			reclen := int(*(*uint16)(unsafe.Pointer(&b[16])))
			if reclen < 19 || reclen > len(b) {
				break
			}
			typ := b[18]
			nameb := b[19:reclen]
			for i, c := range nameb {
				if c == 0 {
					nameb = nameb[:i]
					break
				}
			}
			b = b[reclen:]
			if string(nameb) == "." || string(nameb) == ".." {
				continue
			}
			if arena == nil {
				// Size both from the first buffer's record count.
				c := countRecords(buf[:n])
				arena = make([]byte, 0, n+c*len(prefix))
				out = make([]dirEntry, 0, c)
			}
			arena = append(arena, prefix...)
			arena = append(arena, nameb...)
			ends = append(ends, len(arena))
			t := direntType(typ)
			if t == modeUnknown || t.IsRegular() || t&fs.ModeSymlink != 0 {
				d.nstat++
			}
			out = append(out, dirEntry{typ: t})
		}
	}
	// arena is not written again: its bytes can back the strings.
	all := unsafe.String(unsafe.SliceData(arena), len(arena))
	start := 0
	for i, end := range ends {
		out[i].rel = all[start:end]
		out[i].name = all[start+len(prefix) : end]
		start = end
	}
	return out, nil
}

// countRecords returns the number of dirents in b.
func countRecords(b []byte) int {
	c := 0
	for len(b) >= 19 {
		reclen := int(*(*uint16)(unsafe.Pointer(&b[16])))
		if reclen < 19 || reclen > len(b) {
			break
		}
		b = b[reclen:]
		c++
	}
	return c
}

func direntType(t uint8) fs.FileMode {
	switch t {
	case unix.DT_REG:
		return 0
	case unix.DT_DIR:
		return fs.ModeDir
	case unix.DT_LNK:
		return fs.ModeSymlink
	case unix.DT_FIFO:
		return fs.ModeNamedPipe
	case unix.DT_SOCK:
		return fs.ModeSocket
	case unix.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.DT_BLK:
		return fs.ModeDevice
	}
	return modeUnknown
}

// lstat stats name inside the directory without following a symlink and
// without resolving the path from the root again.
func (d *dirHandle) lstat(name string) (fs.FileInfo, error) {
	// statInfos come from a per-directory slab: one allocation per
	// directory instead of one per file.
	if len(d.slab) == 0 {
		switch {
		case d.sc == nil:
			d.slab = make([]statInfo, max(d.nstat, 1))
		case cap(d.sc.slab) >= d.nstat && d.nstat > 0:
			d.slab = d.sc.slab[:d.nstat]
			d.nstat = 0 // a second round (more entries than counted) allocates
		default:
			d.sc.slab = make([]statInfo, max(d.nstat, 32))
			d.slab = d.sc.slab
			d.nstat = 0
		}
	}
	fi := &d.slab[0]
	d.slab = d.slab[1:]
	fi.name = name
	// Names from getdents hold no NUL byte.
	d.cname = append(append(d.cname[:0], name...), 0)
	p := &d.cname[0]
	// A raw system call: fstatat on a directory just read is served from the
	// inode cache, and skipping the scheduler's syscall bookkeeping (which
	// hands the P to another thread when a call lasts over 20µs) halves the
	// cost of a warm walk.
	_, _, errno := unix.RawSyscall6(unix.SYS_NEWFSTATAT, uintptr(d.fd), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&fi.st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	if errno != 0 {
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: errno}
	}
	return fi, nil
}

// statInfo is an fs.FileInfo from fstatat(2); Sys returns *unix.Stat_t.
type statInfo struct {
	name string
	st   unix.Stat_t
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.st.Size }
func (s *statInfo) ModTime() time.Time { return time.Unix(int64(s.st.Mtim.Sec), int64(s.st.Mtim.Nsec)) }
func (s *statInfo) IsDir() bool        { return s.st.Mode&unix.S_IFMT == unix.S_IFDIR }
func (s *statInfo) Sys() any           { return &s.st }

func (s *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	if s.st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
