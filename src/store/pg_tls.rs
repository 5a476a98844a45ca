//! TLS to a library's PostgreSQL server, with the URL parameters libpq users know:
//! `sslmode` = `disable`, `allow`, `prefer` (the default), `require`, `verify-ca` or
//! `verify-full`, `sslrootcert` (a PEM file of the CA certificates to trust), and `sslcert`
//! with `sslkey` (a client certificate and its private key, PEM, for a server that
//! authenticates stations by certificate: pg_hba's `cert` method).
//!
//! As libpq: `prefer` encrypts when the server offers TLS, `require` refuses a server that
//! does not; neither checks who the server is unless `sslrootcert` names a CA file (then the
//! certificate must chain to it, as `verify-ca`). `verify-ca` checks the chain, `verify-full`
//! the chain and the host name. The CA certificates trusted are `sslrootcert`'s, else the
//! system's (where a hospital's IT installs its own CA). rustls with the ring provider: no
//! system OpenSSL to match at run time.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How much a connection checks of the server: libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// What the URL asks of TLS.
#[derive(Debug, Clone, PartialEq)]
pub struct Tls {
    pub mode: SslMode,
    pub root_cert: Option<PathBuf>,
    /// The station's certificate (`sslcert`), PEM; with `client_key`.
    pub client_cert: Option<PathBuf>,
    /// Its private key (`sslkey`), PEM: readable by its owner alone, as libpq asks.
    pub client_key: Option<PathBuf>,
}

/// The files libpq reads when a URL names none: `$PGSSLROOTCERT`, `$PGSSLCERT` and
/// `$PGSSLKEY`, else `~/.postgresql/root.crt`, `postgresql.crt` and `postgresql.key` where
/// they exist. A station set up for `psql` connects the same way.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Defaults {
    pub root_cert: Option<PathBuf>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
}

impl Defaults {
    /// This user's: the variables, else the files in `$HOME/.postgresql/` that exist.
    pub fn of_this_user() -> Defaults {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Defaults::from(
            var("HOME").map(|h| h.join(".postgresql")).as_deref(),
            var("PGSSLROOTCERT"),
            var("PGSSLCERT"),
            var("PGSSLKEY"),
        )
    }

    /// The variables' values where given, else the files of `folder` that exist.
    pub fn from(
        folder: Option<&Path>,
        root_cert: Option<PathBuf>,
        client_cert: Option<PathBuf>,
        client_key: Option<PathBuf>,
    ) -> Defaults {
        let file = |name: &str| {
            folder
                .map(|f| f.join(name))
                .filter(|p| std::fs::symlink_metadata(p).is_ok())
        };
        Defaults {
            root_cert: root_cert.or_else(|| file("root.crt")),
            client_cert: client_cert.or_else(|| file("postgresql.crt")),
            client_key: client_key.or_else(|| file("postgresql.key")),
        }
    }
}

/// Splits the TLS parameters off `url`: the URL the PostgreSQL client parses (`sslmode`
/// given as one it knows, `sslrootcert` taken out) and what they ask, with this user's
/// [`Defaults`] where the URL names no file.
pub fn split(url: &str) -> Result<(String, Tls), String> {
    split_with(url, &Defaults::of_this_user())
}

/// [`split`] with the given defaults. As libpq: `sslrootcert=system` trusts the system's CA
/// certificates and reads no default; a default certificate is sent only with its key.
pub fn split_with(url: &str, defaults: &Defaults) -> Result<(String, Tls), String> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut kept = Vec::new();
    let mut tls = Tls {
        mode: SslMode::Prefer,
        root_cert: None,
        client_cert: None,
        client_key: None,
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => {
                tls.mode = match value {
                    "disable" => SslMode::Disable,
                    "allow" => SslMode::Allow,
                    "prefer" => SslMode::Prefer,
                    "require" => SslMode::Require,
                    "verify-ca" => SslMode::VerifyCa,
                    "verify-full" => SslMode::VerifyFull,
                    other => {
                        return Err(format!(
                            "sslmode '{other}' is none of disable, allow, prefer, require, \
                             verify-ca, verify-full"
                        ));
                    }
                }
            }
            "sslrootcert" => tls.root_cert = Some(PathBuf::from(percent_decoded(key, value)?)),
            "sslcert" => tls.client_cert = Some(PathBuf::from(percent_decoded(key, value)?)),
            "sslkey" => tls.client_key = Some(PathBuf::from(percent_decoded(key, value)?)),
            _ => kept.push(pair),
        }
    }
    // The URL's files first, then the defaults (not for a connection without TLS).
    let mut system_roots = false;
    if tls.root_cert.as_deref() == Some(Path::new("system")) {
        tls.root_cert = None;
        system_roots = true;
    }
    if tls.root_cert.is_none() && !system_roots && tls.mode != SslMode::Disable {
        tls.root_cert = defaults.root_cert.clone();
    }
    if tls.client_cert.is_none() && tls.client_key.is_none() && tls.mode != SslMode::Disable {
        match (&defaults.client_cert, &defaults.client_key) {
            (Some(cert), Some(key)) => {
                tls.client_cert = Some(cert.clone());
                tls.client_key = Some(key.clone());
            }
            (Some(cert), None) => {
                return Err(format!(
                    "the default certificate {} has no private key beside it (postgresql.key, \
                     or $PGSSLKEY); give both or move the certificate away",
                    cert.display()
                ));
            }
            _ => {}
        }
    }
    if tls.client_cert.is_some() != tls.client_key.is_some() {
        return Err(
            "sslcert and sslkey go together: name the station's certificate and its private \
             key"
            .into(),
        );
    }
    if tls.client_cert.is_some() && tls.mode == SslMode::Disable {
        return Err("sslcert with sslmode=disable: a certificate is only sent over TLS".into());
    }
    // The client knows disable, prefer and require; TLS is then required or not as asked,
    // and the connector below checks as much as the mode says.
    let client_mode = match tls.mode {
        SslMode::Disable => "disable",
        SslMode::Allow | SslMode::Prefer => "prefer",
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => "require",
    };
    kept.push(match client_mode {
        "disable" => "sslmode=disable",
        "prefer" => "sslmode=prefer",
        _ => "sslmode=require",
    });
    Ok((format!("{base}?{}", kept.join("&")), tls))
}

/// `%XX` escapes of a URL value decoded (a path with spaces or `&` in it).
fn percent_decoded(key: &str, value: &str) -> Result<String, String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("{key} '{value}': a broken %-escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{key} '{value}' is not UTF-8"))
}

/// The connector for `tls`: it checks the server's certificate as the mode says.
pub fn connector(tls: &Tls) -> Result<tokio_postgres_rustls::MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let verify =
        matches!(tls.mode, SslMode::VerifyCa | SslMode::VerifyFull) || tls.root_cert.is_some();
    let wants_client = if verify {
        let roots = Arc::new(roots(tls.root_cert.as_deref())?);
        let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| format!("TLS: {e}"))?;
        match tls.mode {
            SslMode::VerifyFull => builder.with_webpki_verifier(webpki),
            _ => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly(webpki))),
        }
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unchecked(provider)))
    };
    let config = match (&tls.client_cert, &tls.client_key) {
        (Some(cert), Some(key)) => {
            let (certs, key) = client_identity(cert, key)?;
            wants_client
                .with_client_auth_cert(certs, key)
                .map_err(|e| format!("sslcert {} with sslkey: {e}", cert.display()))?
        }
        _ => wants_client.with_no_client_auth(),
    };
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// The station's certificate chain and private key, each a PEM file. The key must be
/// readable by its owner alone, as libpq asks (a key others can read is no secret).
fn client_identity(
    cert: &Path,
    key: &Path,
) -> Result<
    (
        Vec<CertificateDer<'static>>,
        rustls::pki_types::PrivateKeyDer<'static>,
    ),
    String,
> {
    let text = crate::plumbing::input::read_text(cert, 16 << 20, "a certificate file")
        .map_err(|e| format!("sslcert: {e}"))?;
    let certs: Vec<CertificateDer<'static>> =
        rustls_pemfile::certs(&mut std::io::Cursor::new(text.into_bytes()))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("sslcert {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "sslcert {}: no PEM certificate in it",
            cert.display()
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(key)
            && meta.permissions().mode() & 0o077 != 0
        {
            return Err(format!(
                "sslkey {}: others can read it (mode {:o}); a private key is its owner's \
                 alone: chmod 600 it",
                key.display(),
                meta.permissions().mode() & 0o777
            ));
        }
    }
    let text = crate::plumbing::input::read_text(key, 1 << 20, "a private key file")
        .map_err(|e| format!("sslkey: {e}"))?;
    let key_der = rustls_pemfile::private_key(&mut std::io::Cursor::new(text.into_bytes()))
        .map_err(|e| format!("sslkey {}: {e}", key.display()))?
        .ok_or_else(|| format!("sslkey {}: no PEM private key in it", key.display()))?;
    Ok((certs, key_der))
}

/// The CA certificates trusted: the file's, else the system's.
fn roots(file: Option<&Path>) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    match file {
        Some(path) => {
            let text = crate::plumbing::input::read_text(path, 16 << 20, "a CA certificate file")
                .map_err(|e| format!("sslrootcert: {e}"))?;
            let mut reader = std::io::Cursor::new(text.into_bytes());
            for cert in rustls_pemfile::certs(&mut reader) {
                let cert = cert.map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
            }
            if roots.is_empty() {
                return Err(format!(
                    "sslrootcert {}: no PEM certificate in it",
                    path.display()
                ));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                let _ = roots.add(cert);
            }
            if roots.is_empty() {
                return Err("no trusted CA certificates found on this system: name the \
                            server's CA file with sslrootcert=PATH in the URL"
                    .into());
            }
        }
    }
    Ok(roots)
}

/// `verify-ca` (or `sslrootcert` with `prefer`/`require`): the chain must lead to a trusted
/// CA; the host name is not compared.
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::CertificateError::{NotValidForName, NotValidForNameContext};
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                NotValidForName | NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer`/`require` without `sslrootcert`, as libpq: encrypted, the server not checked
/// (the handshake's own signatures still are).
#[derive(Debug)]
struct Unchecked(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(url: &str) -> Result<(String, Tls), String> {
        split_with(url, &Defaults::default())
    }

    /// libpq's defaults: the files of `~/.postgresql` that exist, the variables before them,
    /// the URL before both; `sslrootcert=system` reads none; a certificate needs its key.
    #[test]
    fn the_files_libpq_reads_by_default_are_read_where_the_url_names_none() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join(".postgresql");
        std::fs::create_dir_all(&folder).unwrap();
        for f in ["root.crt", "postgresql.crt", "postgresql.key"] {
            std::fs::write(folder.join(f), "x").unwrap();
        }
        let d = Defaults::from(Some(&folder), None, None, None);
        let (_, tls) = split_with("postgres://u@h/db?sslmode=verify-full", &d).unwrap();
        assert_eq!(tls.root_cert, Some(folder.join("root.crt")));
        assert_eq!(tls.client_cert, Some(folder.join("postgresql.crt")));
        assert_eq!(tls.client_key, Some(folder.join("postgresql.key")));
        let (_, tls) = split_with(
            "postgres://u@h/db?sslrootcert=/ca.pem&sslcert=/c&sslkey=/k",
            &d,
        )
        .unwrap();
        assert_eq!(tls.root_cert.as_deref(), Some(Path::new("/ca.pem")));
        assert_eq!(tls.client_cert.as_deref(), Some(Path::new("/c")));
        let (_, tls) = split_with("postgres://u@h/db?sslrootcert=system", &d).unwrap();
        assert_eq!(tls.root_cert, None);
        let (_, tls) = split_with("postgres://u@h/db?sslmode=disable", &d).unwrap();
        assert_eq!((tls.root_cert, tls.client_cert), (None, None));
        let d = Defaults::from(Some(&folder), Some("/env-ca.pem".into()), None, None);
        assert_eq!(d.root_cert.as_deref(), Some(Path::new("/env-ca.pem")));
        std::fs::remove_file(folder.join("postgresql.key")).unwrap();
        let d = Defaults::from(Some(&folder), None, None, None);
        let err = split_with("postgres://u@h/db", &d).unwrap_err();
        assert!(err.contains("has no private key beside it"), "{err}");
        // Nothing there: nothing read.
        let d = Defaults::from(Some(&dir.path().join("none")), None, None, None);
        assert_eq!(d, Defaults::default());
    }

    #[test]
    fn the_tls_parameters_are_split_off_and_the_client_gets_a_mode_it_knows() {
        let (url, tls) = split(
            "postgres://u@h:5/db?sslmode=verify-full&sslrootcert=/a%20b/ca.pem&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(url, "postgres://u@h:5/db?connect_timeout=3&sslmode=require");
        assert_eq!(tls.mode, SslMode::VerifyFull);
        assert_eq!(tls.root_cert.as_deref(), Some(Path::new("/a b/ca.pem")));
        let (url, tls) = split("postgres://u@h/db").unwrap();
        assert_eq!(
            (url.as_str(), tls.mode),
            ("postgres://u@h/db?sslmode=prefer", SslMode::Prefer)
        );
        assert!(split("postgres://u@h/db?sslmode=verify").is_err());
        let (url, tls) = split("postgres://u@h/db?sslcert=/c.pem&sslkey=/k%20x.pem").unwrap();
        assert_eq!(url, "postgres://u@h/db?sslmode=prefer");
        assert_eq!(tls.client_cert.as_deref(), Some(Path::new("/c.pem")));
        assert_eq!(tls.client_key.as_deref(), Some(Path::new("/k x.pem")));
        assert!(split("postgres://u@h/db?sslcert=/c.pem").is_err());
        assert!(split("postgres://u@h/db?sslmode=disable&sslcert=/c&sslkey=/k").is_err());
    }
}
