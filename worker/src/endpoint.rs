//! The endpoints the worker protocol names: `unix:///abs/path` (or a bare absolute
//! path), and, where Unix sockets are not used, loopback TCP as `tcp://host:port` or
//! `http://host:port`. As the reference SDKs, a TCP host must be `localhost` or a
//! loopback address: the protocol has no transport security, so a worker never
//! listens on, or sends its token to, another machine.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

/// Where a gRPC server listens or a client connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A Unix socket at an absolute path.
    Unix(PathBuf),
    /// A loopback TCP address (port 0: any free port, for a server).
    Tcp(SocketAddr),
}

impl Endpoint {
    /// Parses `value`; the error says what is wrong with it.
    pub fn parse(value: &str) -> Result<Endpoint, &'static str> {
        let (scheme, rest) = match value.split_once("://") {
            Some((scheme, rest)) => (Some(scheme), rest),
            None => (None, value),
        };
        match scheme {
            None | Some("unix") => {
                if !rest.starts_with('/') {
                    return Err("the socket path must be absolute");
                }
                Ok(Endpoint::Unix(PathBuf::from(rest)))
            }
            Some("tcp" | "http") => tcp_address(rest).map(Endpoint::Tcp),
            Some(_) => Err("endpoints are unix://, tcp:// or http://"),
        }
    }

    /// The Unix socket's path, when it is one.
    pub fn unix_path(&self) -> Option<&Path> {
        match self {
            Endpoint::Unix(path) => Some(path),
            Endpoint::Tcp(_) => None,
        }
    }
}

impl fmt::Display for Endpoint {
    /// `unix:///abs/path` or `http://host:port`, as the reference announces them.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(path) => write!(formatter, "unix://{}", path.display()),
            Endpoint::Tcp(address) => write!(formatter, "http://{address}"),
        }
    }
}

impl From<PathBuf> for Endpoint {
    fn from(path: PathBuf) -> Self {
        Endpoint::Unix(path)
    }
}

impl From<&Path> for Endpoint {
    fn from(path: &Path) -> Self {
        Endpoint::Unix(path.to_path_buf())
    }
}

impl From<&PathBuf> for Endpoint {
    fn from(path: &PathBuf) -> Self {
        Endpoint::Unix(path.clone())
    }
}

impl From<SocketAddr> for Endpoint {
    fn from(address: SocketAddr) -> Self {
        Endpoint::Tcp(address)
    }
}

/// `host:port` with a loopback host: `localhost`, `127.x.y.z`, `[::1]`; nothing
/// after the port but an optional `/`.
fn tcp_address(authority: &str) -> Result<SocketAddr, &'static str> {
    let authority = authority.strip_suffix('/').unwrap_or(authority);
    if authority.contains(['/', '?', '#', '@']) {
        return Err("a TCP endpoint is host:port, with no path, query or user");
    }
    let (host, port) = authority
        .rsplit_once(':')
        .ok_or("a TCP endpoint needs a port (host:port)")?;
    let port: u16 = port
        .parse()
        .map_err(|_| "the port must be a number from 0 to 65535")?;
    let host = host
        .strip_prefix('[')
        .and_then(|host| host.strip_suffix(']'))
        .unwrap_or(host);
    let address: IpAddr = if host.eq_ignore_ascii_case("localhost") {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        host.parse()
            .map_err(|_| "the host must be localhost or an explicit loopback address")?
    };
    if !address.is_loopback() {
        return Err("the host is not a loopback address: workers speak to this machine only");
    }
    Ok(SocketAddr::new(address, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_and_loopback_tcp_endpoints_parse_and_others_are_refused_with_the_reason() {
        assert_eq!(
            Endpoint::parse("unix:///run/w.sock"),
            Ok(Endpoint::Unix("/run/w.sock".into()))
        );
        assert_eq!(
            Endpoint::parse("/run/w.sock"),
            Ok(Endpoint::Unix("/run/w.sock".into()))
        );
        let v4 = SocketAddr::from(([127, 0, 0, 1], 4317));
        assert_eq!(
            Endpoint::parse("tcp://127.0.0.1:4317"),
            Ok(Endpoint::Tcp(v4))
        );
        assert_eq!(
            Endpoint::parse("http://localhost:4317/"),
            Ok(Endpoint::Tcp(v4))
        );
        assert_eq!(
            Endpoint::parse("tcp://127.8.9.10:0"),
            Ok(Endpoint::Tcp(SocketAddr::from(([127, 8, 9, 10], 0))))
        );
        assert_eq!(
            Endpoint::parse("http://[::1]:9"),
            Ok(Endpoint::Tcp(SocketAddr::from((
                std::net::Ipv6Addr::LOCALHOST,
                9
            ))))
        );
        for (value, reason) in [
            ("unix://w.sock", "the socket path must be absolute"),
            (
                "grpc://127.0.0.1:1",
                "endpoints are unix://, tcp:// or http://",
            ),
            ("tcp://127.0.0.1", "a TCP endpoint needs a port (host:port)"),
            (
                "tcp://127.0.0.1:70000",
                "the port must be a number from 0 to 65535",
            ),
            (
                "http://127.0.0.1:80/v1",
                "a TCP endpoint is host:port, with no path, query or user",
            ),
            (
                "tcp://10.0.0.7:4317",
                "the host is not a loopback address: workers speak to this machine only",
            ),
            (
                "http://0.0.0.0:4317",
                "the host is not a loopback address: workers speak to this machine only",
            ),
            (
                "http://example.com:4317",
                "the host must be localhost or an explicit loopback address",
            ),
        ] {
            assert_eq!(Endpoint::parse(value), Err(reason), "{value}");
        }
    }

    #[test]
    fn endpoints_are_written_as_the_reference_announces_them() {
        assert_eq!(
            Endpoint::Unix("/run/w.sock".into()).to_string(),
            "unix:///run/w.sock"
        );
        assert_eq!(
            Endpoint::Tcp(SocketAddr::from(([127, 0, 0, 1], 5))).to_string(),
            "http://127.0.0.1:5"
        );
    }
}
