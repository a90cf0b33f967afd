package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// syncWork makes go.work's replace directives the versions of the
// workspace's own modules that its go.mod files require, each to the
// module's directory. In workspace mode the go command still reads the
// go.mod of every version a workspace module requires (using a module in
// go.work does not replace its other versions in the module graph): a
// version not on the module proxy yet, a commit not pushed, would fail
// every build in the repository without them. go.work is not in any
// module, so a user's go get never sees them.
func syncWork(repo string) error {
	name := filepath.Join(repo, "go.work")
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	w, err := modfile.ParseWork(name, data, nil)
	if err != nil {
		return err
	}
	dirs := map[string]string{} // module path -> its directory in go.work
	var files []*modfile.File
	for _, u := range w.Use {
		f, err := readMod(filepath.Join(repo, filepath.FromSlash(u.Path)))
		if err != nil {
			return err
		}
		dirs[f.Module.Mod.Path] = u.Path
		files = append(files, f)
	}
	var want []module.Version
	for _, f := range files {
		for _, r := range f.Require {
			if _, ok := dirs[r.Mod.Path]; ok && !slices.Contains(want, r.Mod) {
				want = append(want, r.Mod)
			}
		}
	}
	module.Sort(want)
	for _, r := range slices.Clone(w.Replace) {
		if _, ok := dirs[r.Old.Path]; ok {
			if err := w.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return err
			}
		}
	}
	w.Cleanup()
	out := modfile.Format(w.Syntax)
	if len(want) > 0 {
		block := "\nreplace (\n"
		for _, m := range want {
			block += fmt.Sprintf("\t%s %s => %s\n", m.Path, m.Version, localPath(dirs[m.Path]))
		}
		out = append(out, block+")\n"...)
	}
	if _, err := modfile.ParseWork(name, out, nil); err != nil {
		return err
	}
	fmt.Printf("== go.work: replace %v with the local copies\n", want)
	return os.WriteFile(name, out, 0o644)
}

// localPath is a use path as a replacement: a directory path must start
// with ./ or ../ to be one.
func localPath(p string) string {
	switch {
	case p == ".":
		return "./"
	case strings.HasPrefix(p, "./"), strings.HasPrefix(p, "../"), filepath.IsAbs(p):
		return p
	}
	return "./" + p
}
