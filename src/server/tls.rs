//! HTTPS: `replicad serve --tls-cert PEM --tls-key PEM` serves TLS with rustls (ring provider),
//! offering HTTP/2 and HTTP/1.1 by ALPN. The handshake runs inside each connection's own task
//! (a slow or hostile client never blocks the accept loop) and is bounded by
//! `--tls-handshake-timeout`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Loads the certificate chain and private key (PEM files) into an acceptor. Errors name the
/// file at fault, for the operator.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|source| TlsError::Cert { path: cert.to_path_buf(), source })?;
    if certs.is_empty() {
        return Err(TlsError::NoCert(cert.to_path_buf()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|source| TlsError::Key { path: key.to_path_buf(), source })?;
    let mut config = rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Why [`acceptor`] could not be made; the text names the flag and file at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The `--tls-cert` file cannot be read or is not PEM certificates.
    #[error("--tls-cert {}: {source}", path.display())]
    Cert { path: PathBuf, source: pem::Error },
    /// The `--tls-cert` file holds no certificate.
    #[error("--tls-cert {}: no certificate in the file", .0.display())]
    NoCert(PathBuf),
    /// The `--tls-key` file cannot be read or holds no PEM private key.
    #[error("--tls-key {}: {source}", path.display())]
    Key { path: PathBuf, source: pem::Error },
    /// rustls refuses the pair (the key does not match the certificate, an unsupported key).
    #[error("--tls-cert/--tls-key: {0}")]
    Pair(#[from] rustls::Error),
}

/// The TLS handshake on `stream`, bounded by `timeout`; `None` when it fails (logged at debug
/// level: failed handshakes are the client's business).
pub async fn handshake(acceptor: &TlsAcceptor, stream: TcpStream, timeout: Duration) -> Option<TlsStream<TcpStream>> {
    match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!("TLS handshake timed out");
            None
        }
    }
}
