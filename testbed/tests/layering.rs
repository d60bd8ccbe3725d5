//! No circle of imports inside any crate of the workspace: at every level of a crate's module tree,
//! the modules of one parent use each other as a directed graph without cycles, so each can be read,
//! and moved, from the bottom up.
//!
//! A module "uses" another when its code names a path into it (`use crate::a::b`, `super::c::f()`,
//! an import followed through to where it comes from). A use between `a::x` and `b::y` counts as a
//! use of `b` by `a`, the two children of the parent they share; a module using its own parent or
//! child is the ordinary shape of a module tree and is not a circle.
//!
//! Code under `#[cfg(test)]` (unit-test modules, shared test fixtures) is left out: it is built only
//! into the test binary, where it sits above every module it tests, as a crate's `tests/` do.
//!
//! Why our own check: the tool that does this, `cargo modules dependencies --acyclic`, is built on
//! rust-analyzer's crates, minutes of compiling on our 2-core machines for every CI run that
//! installs it; this test reads the sources with `syn` (the parser Rust's derive macros use), which
//! the build has anyway, and runs in a second without the test bed. `cargo test --workspace`
//! (`make test`) runs it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module, as its path from the crate root (`["commands", "reset", "wait"]`).
type ModPath = Vec<String>;

/// The children of one module: which of its children each uses.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// [`Graph`], each use with one that makes it: `(from module, to module)`, for the message.
type Evidence = BTreeMap<String, BTreeMap<String, (String, String)>>;

/// The crate roots of the workspace, relative to its root: each is one module tree.
const ROOTS: &[&str] = &[
    "core/src/lib.rs",
    "adapters/src/lib.rs",
    "operator/src/main.rs",
    "cli/src/main.rs",
    "ledger-tests/src/lib.rs",
    "testbed/src/lib.rs",
    "testbed/src/bin/bench.rs",
    "testbed/src/bin/standin.rs",
];

/// A circle as [`circles`] finds it.
struct Circle {
    root: &'static str,
    /// The parent module, `crate` for the root.
    parent: String,
    /// `a -> b -> a`, and every module caught in it when there are more.
    shown: String,
    /// The uses that close it, `a uses b: a::x names b::y`.
    why: Vec<String>,
}

/// What one crate's sources say: each module, and the names its `use` items bring in (to follow an
/// import to the module it comes from).
#[derive(Default)]
struct Crate {
    modules: BTreeSet<ModPath>,
    /// Per module: imported name -> the path it names, absolute from the crate root.
    imports: BTreeMap<ModPath, BTreeMap<String, ModPath>>,
    /// Per module: the paths its code names, absolute from the crate root (not yet resolved to a
    /// module).
    uses: BTreeMap<ModPath, Vec<ModPath>>,
}

/// `path` as written in module `at`, made absolute from the crate root, when it starts with
/// `crate`, `super` or `self` (anything else names another crate, a prelude name, or a local item).
fn absolute(at: &[String], path: &[String]) -> Option<ModPath> {
    let mut segments = path.iter().peekable();
    let mut base: ModPath = match segments.peek().map(|s| s.as_str()) {
        Some("crate") => {
            segments.next();
            Vec::new()
        }
        Some("super") | Some("self") => at.to_vec(),
        _ => return None,
    };
    while let Some(s) = segments.peek() {
        match s.as_str() {
            "super" => {
                base.pop()?;
            }
            "self" => {}
            _ => break,
        }
        segments.next();
    }
    base.extend(segments.cloned());
    Some(base)
}

/// Every path of a use tree, each ending at the name it brings in (`*` for a glob).
fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut path = prefix.clone();
            if name != "self" {
                path.push(name.clone());
            }
            let local = if name == "self" { prefix.last().cloned().unwrap_or_default() } else { name };
            out.push((path, local));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((path, r.rename.to_string()));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), "*".to_string())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_paths(t, prefix, out);
            }
        }
    }
}

/// Walks one file's items, module by module.
struct Walker<'a> {
    krate: &'a mut Crate,
    /// The module being walked.
    at: ModPath,
    /// The directory its child modules' files are in.
    dir: PathBuf,
}

impl Walker<'_> {
    fn uses(&mut self, path: Vec<String>) {
        if let Some(abs) = absolute(&self.at, &path) {
            self.krate.uses.entry(self.at.clone()).or_default().push(abs);
        }
    }
}

/// Whether `attrs` hold `#[cfg(test)]`.
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|cfg| cfg == "test"))
}

/// The attributes of `item`, for the kinds of item that hold code or imports.
fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

impl<'ast> Visit<'ast> for Walker<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !test_only(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if test_only(&m.attrs) {
            return;
        }
        let name = m.ident.to_string();
        let mut at = self.at.clone();
        at.push(name.clone());
        match &m.content {
            Some((_, items)) => {
                let mut inner = Walker { krate: self.krate, at: at.clone(), dir: self.dir.join(&name) };
                inner.krate.modules.insert(at);
                for item in items {
                    inner.visit_item(item);
                }
            }
            None => {
                let file = path_attribute(m)
                    .map(|p| self.dir.join(p))
                    .or_else(|| {
                        [self.dir.join(format!("{name}.rs")), self.dir.join(&name).join("mod.rs")]
                            .into_iter()
                            .find(|f| f.exists())
                    })
                    .unwrap_or_else(|| panic!("no file for module {} in {}", name, self.dir.display()));
                walk_file(self.krate, &file, at);
            }
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut paths = Vec::new();
        use_paths(&u.tree, &mut Vec::new(), &mut paths);
        for (path, local) in paths {
            // A use item may start at a child module without `self::` (Rust 2018 paths).
            let first_is_child = path.first().is_some_and(|f| {
                let mut child = self.at.clone();
                child.push(f.clone());
                self.krate.modules.contains(&child) || f == "crate" || f == "super" || f == "self"
            });
            let path = if first_is_child && !matches!(path[0].as_str(), "crate" | "super" | "self") {
                std::iter::once("self".to_string()).chain(path).collect()
            } else {
                path
            };
            if let Some(abs) = absolute(&self.at, &path) {
                if local != "*" {
                    self.krate.imports.entry(self.at.clone()).or_default().insert(local, abs.clone());
                }
                self.krate.uses.entry(self.at.clone()).or_default().push(abs);
            }
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.uses(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }

    /// Paths inside macro calls (`format!("{}", crate::a::b())`) are tokens, not syntax: find
    /// `crate`/`super`/`self` followed by `::` and names.
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        syn::visit::visit_macro(self, m);
        let mut found = Vec::new();
        token_paths(m.tokens.clone(), &mut found);
        for path in found {
            self.uses(path);
        }
    }
}

/// The `crate::`, `super::` and `self::` paths in `tokens`, groups included.
fn token_paths(tokens: proc_macro2::TokenStream, out: &mut Vec<Vec<String>>) {
    let tokens: Vec<proc_macro2::TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            proc_macro2::TokenTree::Group(g) => token_paths(g.stream(), out),
            proc_macro2::TokenTree::Ident(id) if matches!(id.to_string().as_str(), "crate" | "super" | "self") => {
                let mut path = vec![id.to_string()];
                let mut j = i + 1;
                while let (Some(proc_macro2::TokenTree::Punct(a)), Some(proc_macro2::TokenTree::Punct(b))) =
                    (tokens.get(j), tokens.get(j + 1))
                {
                    if a.as_char() != ':' || b.as_char() != ':' {
                        break;
                    }
                    let Some(proc_macro2::TokenTree::Ident(next)) = tokens.get(j + 2) else { break };
                    path.push(next.to_string());
                    j += 3;
                }
                if path.len() > 1 {
                    out.push(path);
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
}

/// The file a `#[path = "..."]` attribute names, relative to the declaring file's directory.
fn path_attribute(m: &syn::ItemMod) -> Option<String> {
    m.attrs.iter().find(|a| a.path().is_ident("path")).and_then(|a| match &a.meta {
        syn::Meta::NameValue(nv) => match &nv.value {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Reads module `at` from `file`, and its child modules from theirs.
fn walk_file(krate: &mut Crate, file: &Path, at: ModPath) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    // A crate root or a `mod.rs` has its children beside it; `a.rs` has them in `a/`.
    let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let parent = file.parent().unwrap_or(Path::new("")).to_path_buf();
    let dir = if at.is_empty() || stem == "mod" { parent } else { parent.join(stem) };
    krate.modules.insert(at.clone());
    let mut walker = Walker { krate, at, dir };
    // Child modules first, so that `use child::x` is known to start at a child.
    for item in &ast.items {
        if let syn::Item::Mod(m) = item {
            walker.visit_item_mod(m);
        }
    }
    for item in &ast.items {
        if !matches!(item, syn::Item::Mod(_)) {
            walker.visit_item(item);
        }
    }
}

impl Crate {
    fn read(root: &Path) -> Crate {
        let mut krate = Crate::default();
        walk_file(&mut krate, root, Vec::new());
        krate
    }

    /// The module an absolute path names: its longest prefix that is a module, following imports
    /// (`use super::status::flows` in `a`, then `a::flows` from elsewhere, is a use of `status`).
    fn module_of(&self, path: &[String], depth: usize) -> ModPath {
        let mut at: ModPath = Vec::new();
        for (i, segment) in path.iter().enumerate() {
            let mut child = at.clone();
            child.push(segment.clone());
            if self.modules.contains(&child) {
                at = child;
                continue;
            }
            if depth < 8
                && let Some(target) = self.imports.get(&at).and_then(|m| m.get(segment))
                && target.as_slice() != &path[..=i]
            {
                let mut rest = target.clone();
                rest.extend(path[i + 1..].iter().cloned());
                return self.module_of(&rest, depth + 1);
            }
            break;
        }
        at
    }

    /// For each parent module, the uses between its children: `a` uses `b` when a module in `a`
    /// names a path into `b`.
    fn sibling_uses(&self) -> BTreeMap<ModPath, Graph> {
        self.sibling_uses_with_evidence()
            .into_iter()
            .map(|(parent, g)| (parent, g.into_iter().map(|(a, to)| (a, to.into_keys().collect())).collect()))
            .collect()
    }

    /// [`Self::sibling_uses`], each with one use that makes it: `(from module, to module)`.
    fn sibling_uses_with_evidence(&self) -> BTreeMap<ModPath, Evidence> {
        let mut out: BTreeMap<ModPath, Evidence> = BTreeMap::new();
        for (from, paths) in &self.uses {
            for path in paths {
                let to = self.module_of(path, 0);
                let shared = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                // One is the other's ancestor: no pair of siblings.
                if shared == from.len() || shared == to.len() {
                    continue;
                }
                out.entry(from[..shared].to_vec())
                    .or_default()
                    .entry(from[shared].clone())
                    .or_default()
                    .entry(to[shared].clone())
                    .or_insert_with(|| (from.join("::"), to.join("::")));
            }
        }
        out
    }
}

/// The strongly connected components of more than one node (Tarjan's algorithm), each sorted.
fn components(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn connect<'g>(s: &mut State<'g>, v: &'g str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                connect(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("indexed above");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("indexed above");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            connect(&mut s, v);
        }
    }
    s.out
}

/// One cycle through every module of `component`, as `a -> b -> a` (a shortest way back to the
/// first, by breadth-first search, shows how they close the circle).
fn cycle(graph: &Graph, component: &[String]) -> String {
    let start = &component[0];
    let inside: BTreeSet<&String> = component.iter().collect();
    let mut previous: BTreeMap<&String, &String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    'search: while let Some(v) = queue.pop_front() {
        for w in graph.get(v).into_iter().flatten().filter(|w| inside.contains(w)) {
            if w == start {
                previous.insert(start, v);
                break 'search;
            }
            if !previous.contains_key(w) {
                previous.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    let mut way = vec![start.clone()];
    let mut v = previous.get(start).copied();
    while let Some(p) = v {
        if p == start {
            break;
        }
        way.push(p.clone());
        v = previous.get(p).copied();
    }
    way.push(start.clone());
    way.reverse();
    way.join(" -> ")
}

/// Every circle of every crate: per parent module, each set of its children that use each other
/// in a circle.
fn circles() -> Vec<Circle> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    for root in ROOTS {
        let krate = Crate::read(&workspace.join(root));
        let evidence = krate.sibling_uses_with_evidence();
        for (parent, graph) in krate.sibling_uses() {
            for modules in components(&graph) {
                let cycle = cycle(&graph, &modules);
                let shown = if cycle.matches(" -> ").count() < modules.len() {
                    format!("{cycle} [{}]", modules.join(", "))
                } else {
                    cycle
                };
                let mut why = Vec::new();
                for a in &modules {
                    for (b, (from, to)) in &evidence[&parent][a] {
                        if modules.contains(b) {
                            why.push(format!("{a} uses {b}: {from} names {to}"));
                        }
                    }
                }
                let parent = if parent.is_empty() { "crate".to_string() } else { parent.join("::") };
                out.push(Circle { root, parent, shown, why });
            }
        }
    }
    out
}

#[test]
fn no_module_circles_within_a_crate() {
    let found: String = circles()
        .iter()
        .map(|c| {
            let why: String = c.why.iter().map(|w| format!("    {w}\n")).collect();
            format!("  {}: {}: {}\n{why}", c.root, c.parent, c.shown)
        })
        .collect();
    assert!(
        found.is_empty(),
        "circles of imports (break each by moving what both sides use to a module below them):\n{found}"
    );
}

#[test]
fn a_circle_is_found() {
    let dir = std::env::temp_dir().join(format!("flow-layering-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a; mod b; mod c; use a::x::F;\n").unwrap();
    std::fs::write(dir.join("a.rs"), "pub mod x;\n").unwrap();
    std::fs::write(dir.join("a/x.rs"), "pub fn f() { println!(\"{}\", crate::b::g()); }\n").unwrap();
    std::fs::write(dir.join("b.rs"), "use super::F;\npub fn g() -> u8 { 1 }\n").unwrap();
    std::fs::write(dir.join("c.rs"), "use crate::b::g;\n").unwrap();
    let krate = Crate::read(&dir.join("lib.rs"));
    let graph = krate.sibling_uses().remove(&Vec::new()).unwrap_or_default();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(components(&graph), vec![vec!["a".to_string(), "b".to_string()]], "{graph:?}");
    assert_eq!(cycle(&graph, &["a".to_string(), "b".to_string()]), "a -> b -> a");
}

#[test]
fn test_only_code_is_left_out() {
    let dir = std::env::temp_dir().join(format!("flow-layering-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // `a` uses `b` in its product code; `b` uses `a` only in its unit tests, and `fixtures` (a
    // test-only module) uses both, as `a`'s tests use it.
    std::fs::write(dir.join("lib.rs"), "mod a; mod b;\n#[cfg(test)]\nmod fixtures;\n").unwrap();
    std::fs::write(
        dir.join("a.rs"),
        "pub fn f() -> u8 { crate::b::g() }\n#[cfg(test)]\nmod tests { use crate::fixtures::h; }\n",
    )
    .unwrap();
    std::fs::write(dir.join("b.rs"), "pub fn g() -> u8 { 1 }\n#[cfg(test)]\nuse crate::a::f;\n").unwrap();
    std::fs::write(dir.join("fixtures.rs"), "pub fn h() -> u8 { crate::a::f() + crate::b::g() }\n").unwrap();
    let krate = Crate::read(&dir.join("lib.rs"));
    let graph = krate.sibling_uses().remove(&Vec::new()).unwrap_or_default();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(components(&graph).is_empty(), "{graph:?}");
    assert!(graph.get("a").is_some_and(|uses| uses.contains("b")), "the product code's use is kept: {graph:?}");
}
