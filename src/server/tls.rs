//! HTTPS: `replicad serve --tls-cert PEM --tls-key PEM` serves TLS with rustls (ring provider),
//! offering HTTP/2 and HTTP/1.1 by ALPN. The handshake runs inside each connection's own task
//! (a slow or hostile client never blocks the accept loop) and is bounded by
//! `--tls-handshake-timeout`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Loads the certificate chain and private key (PEM files) into an acceptor. Errors name the
/// file at fault, for the operator.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("--tls-cert {}: no certificate in the file", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("--tls-key {}: {e}", key.display()))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("--tls-cert/--tls-key: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
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
