//! `pinplan --version`: the package version, the git revision of the build
//! (`cli/build.rs`) and the MIP backend, e.g.
//! `0.1.0 (git 1a2b3c4d5e6f) — MIP backend: CBC 2.10.8`. Which backend is
//! the library's to say ([`pinplan::solve::backend::VERSION`]); the CBC
//! library's version comes from the build.

use std::sync::LazyLock;

/// The git revision: a 12-digit hash, `-dirty` when the tree had changes,
/// or `unknown`.
pub const GIT_REVISION: &str = env!("PINPLAN_GIT_REVISION");

/// The version of the CBC library linked (empty when unknown).
const CBC_VERSION: &str = env!("PINPLAN_CBC_VERSION");

static TEXT: LazyLock<String> = LazyLock::new(|| {
    let mut backend = backend().to_owned();
    if pinplan::solve::backend::NAME == "cbc" && !CBC_VERSION.is_empty() {
        backend = format!("{backend} {CBC_VERSION}");
    }
    format!(
        "{} (git {GIT_REVISION}) — MIP backend: {backend}",
        env!("CARGO_PKG_VERSION")
    )
});

/// What `--version` prints after `pinplan `.
pub fn text() -> &'static str {
    TEXT.as_str()
}

/// The backend as the library's version names it (`CBC`, `HiGHS`, `microlp`).
fn backend() -> &'static str {
    let version = pinplan::solve::backend::VERSION;
    version
        .split_once("MIP backend: ")
        .map_or(pinplan::solve::backend::NAME, |(_, rest)| {
            rest.trim_end_matches(')')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_backend_the_library_solves_with() {
        assert!(
            backend().eq_ignore_ascii_case(pinplan::solve::backend::NAME),
            "{} vs {}",
            backend(),
            pinplan::solve::backend::NAME
        );
        assert!(
            text().contains(&format!("MIP backend: {}", backend())),
            "{}",
            text()
        );
        assert!(text().starts_with(env!("CARGO_PKG_VERSION")), "{}", text());
    }

    #[test]
    fn the_revision_is_a_short_hash_or_unknown() {
        let hash = GIT_REVISION.trim_end_matches("-dirty");
        assert!(
            GIT_REVISION == "unknown"
                || (hash.len() == 12 && hash.chars().all(|c| c.is_ascii_hexdigit())),
            "{GIT_REVISION}"
        );
    }
}
