//! Kubernetes version priority (upstream `version.CompareKubeAwareVersionStrings`): GA before beta before alpha,
//! higher major first, then higher minor; names that do not look like Kubernetes versions come last,
//! alphabetically.

use std::cmp::Ordering;

/// A parsed `v<major>[alpha|beta<minor>]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct KubeVersion {
    major: u64,
    /// 2 for GA, 1 for beta, 0 for alpha.
    stability: u8,
    minor: u64,
}

fn parse(version: &str) -> Option<KubeVersion> {
    let rest = version.strip_prefix('v')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let major = rest[..digits].parse().ok()?;
    let rest = &rest[digits..];
    if rest.is_empty() {
        return Some(KubeVersion {
            major,
            stability: 2,
            minor: 0,
        });
    }
    let (stability, minor) = if let Some(m) = rest.strip_prefix("beta") {
        (1, m)
    } else if let Some(m) = rest.strip_prefix("alpha") {
        (0, m)
    } else {
        return None;
    };
    if minor.is_empty() || !minor.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(KubeVersion {
        major,
        stability,
        minor: minor.parse().ok()?,
    })
}

/// Orders versions highest priority first: `v2 < v1 < v1beta2 < v1beta1 < v1alpha1 < foo`.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => y
            .stability
            .cmp(&x.stability)
            .then(y.major.cmp(&x.major))
            .then(y.minor.cmp(&x.minor)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_order() {
        let mut versions = vec![
            "v1alpha1",
            "foo",
            "v1",
            "v2beta1",
            "v1beta1",
            "v11alpha2",
            "v2",
            "v1beta2",
            "bar",
        ];
        versions.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            versions,
            [
                "v2",
                "v1",
                "v2beta1",
                "v1beta2",
                "v1beta1",
                "v11alpha2",
                "v1alpha1",
                "bar",
                "foo"
            ]
        );
    }
}
