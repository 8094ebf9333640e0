//! Path → operation lookup with matchit: one tree of paths, each path holding its methods, so a
//! path known for other methods answers 405 with `Allow` instead of 404.

use hyper::Method;

use crate::error::{Code, Error, Result};

/// A path's operations: `(method, index into the route list)`.
struct PathEntry {
    methods: Vec<(Method, usize)>,
}

/// The compiled route table.
pub struct Router {
    tree: matchit::Router<usize>,
    paths: Vec<PathEntry>,
}

/// A matched operation: the route index and the path parameters.
pub struct Matched {
    pub route: usize,
    pub params: Vec<(String, String)>,
}

impl Router {
    /// Builds the tree from `(method, path)` rows; row `i` is reported as route `i`.
    /// Panics on a malformed or conflicting path: the table is static and checked by tests.
    pub fn new<'a>(rows: impl IntoIterator<Item = (Method, &'a str)>) -> Router {
        let mut tree = matchit::Router::new();
        let mut paths: Vec<PathEntry> = Vec::new();
        let mut by_path: Vec<&str> = Vec::new();
        for (i, (method, path)) in rows.into_iter().enumerate() {
            match by_path.iter().position(|p| *p == path) {
                Some(p) => paths[p].methods.push((method, i)),
                None => {
                    tree.insert(path, paths.len()).expect("valid, non-conflicting route path");
                    paths.push(PathEntry { methods: vec![(method, i)] });
                    by_path.push(path);
                }
            }
        }
        Router { tree, paths }
    }

    /// Finds the operation for `method` and `path`: 404 `ROUTE_NOT_FOUND` for an unknown path,
    /// 405 (with the allowed methods in the message) for a known path and another method.
    pub fn find(&self, method: &Method, path: &str) -> Result<Matched, (Error, Option<String>)> {
        let m = self
            .tree
            .at(path)
            .map_err(|_| (Error::new(Code::RouteNotFound, format!("no operation at {path}")), None))?;
        let entry = &self.paths[*m.value];
        let params = m.params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        if let Some((_, route)) = entry.methods.iter().find(|(mm, _)| mm == method) {
            return Ok(Matched { route: *route, params });
        }
        if method == Method::HEAD {
            if let Some((_, route)) = entry.methods.iter().find(|(mm, _)| mm == Method::GET) {
                return Ok(Matched { route: *route, params });
            }
        }
        let allow: Vec<&str> = entry.methods.iter().map(|(m, _)| m.as_str()).collect();
        let allow = allow.join(", ");
        let msg = format!("{method} is not allowed at {path}; allowed: {allow}");
        Err((Error::new(Code::MethodNotAllowed, msg), Some(allow)))
    }
}
