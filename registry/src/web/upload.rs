//! `/upload`: the form (token, component file, signature) and its post,
//! which runs the same publish as `POST /v1/plugins` (signature, load
//! check, ownership, size and rate limits) and shows the new version or
//! the refusal: every problem of a rejected plugin's report.
//!
//! The form is safe against cross-site posts without a cookie or a hidden
//! token: it authenticates with the API token typed into it, which another
//! site cannot know. A post whose `Origin` (or `Sec-Fetch-Site`) says it
//! comes from another site is refused all the same.

use std::fmt::Write as _;

use std::sync::Arc;

use axum::extract::multipart::{Field, MultipartError};
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{HeaderMap, StatusCode, header};

use super::allowance::{Allowance, CappedBody};
use super::error::WebError;
use super::html::{Esc, Page, plugin_path};
use crate::error::Error;
use crate::server::Tokens;
use crate::{Account, Published, Registry, UploadSlot};

/// The longest token field read (tokens are 47 bytes).
const MAX_TOKEN_BYTES: usize = 256;
/// The longest signature field read (a signature is 88 bytes of base64).
const MAX_SIGNATURE_BYTES: usize = 1024;
/// What the form may send before its token is accepted and its upload slot
/// taken (preamble, part headers, the token field), and what each part's
/// headers may take after: a stranger costs the registry this much.
const MAX_FORM_HEAD_BYTES: usize = 8 * 1024;

pub(super) async fn form() -> Page {
    Page::ok(
        "Upload a plugin",
        format!("<h1>Upload a plugin</h1>\n{}", form_html()),
    )
}

/// The form again, under a refusal.
fn again() -> String {
    format!("<h2>Upload again</h2>\n{}", form_html())
}

/// The form and how to sign for it.
fn form_html() -> String {
    "<p>Publishes a plugin component. The registry checks it as <code>sandwit validate</code> \
     does; a plugin that fails the check is refused with every problem found.</p>\n\
     <p>Sign the component first with <code>sandwit sign PLUGIN.wasm --key FILE</code>, using a \
     key made by <code>sandwit keygen --out FILE</code> whose public half \
     (<code>FILE.pub</code>) is registered for your account (<code>POST /v1/keys</code>, with the \
     key's proof of possession; <code>sandwit publish</code> registers it).</p>\n\
     <form class=\"upload\" method=\"post\" action=\"/upload\" enctype=\"multipart/form-data\">\n\
     <p><label for=\"token\">API token</label>\n\
     <input type=\"password\" id=\"token\" name=\"token\" required autocomplete=\"off\" \
     maxlength=\"256\" aria-describedby=\"token-help\">\n\
     <small id=\"token-help\">From <code>sandwit registry token create</code>; sent only with \
     this form.</small></p>\n\
     <p><label for=\"component\">Component (.wasm)</label>\n\
     <input type=\"file\" id=\"component\" name=\"component\" required \
     accept=\".wasm,application/wasm\"></p>\n\
     <p><label for=\"signature\">Signature</label>\n\
     <input type=\"text\" id=\"signature\" name=\"signature\" required autocomplete=\"off\" \
     spellcheck=\"false\" maxlength=\"1024\" aria-describedby=\"signature-help\">\n\
     <small id=\"signature-help\">The base64 text <code>sandwit sign</code> prints.</small></p>\n\
     <p><button type=\"submit\">Upload</button></p>\n\
     </form>\n"
        .to_string()
}

pub(super) async fn upload(
    State(registry): State<Registry>,
    tokens: Option<axum::Extension<Tokens>>,
    request: Request,
) -> Result<Page, WebError> {
    let refused = |e: Error| super::error::error_page(&e, again());
    if let Err(e) = same_origin(request.headers()) {
        return Ok(refused(e));
    }
    let Some(axum::Extension(tokens)) = tokens else {
        return Err(Error::Internal(anyhow::anyhow!(
            "the web page is served without the service's token resolver"
        ))
        .into());
    };
    // Nothing past the form's head is read until its token is accepted.
    let allowance = Allowance::new(MAX_FORM_HEAD_BYTES);
    let (parts, body) = request.into_parts();
    let request = Request::from_parts(parts, CappedBody::wrap(body, allowance.clone()));
    let multipart = match Multipart::from_request(request, &()).await {
        Ok(multipart) => multipart,
        Err(rejection) => {
            return Ok(refused(Error::bad_request(
                "invalid-form",
                rejection.body_text(),
            )));
        }
    };
    let mut form = Form {
        multipart,
        allowance,
        account: None,
    };
    match form.read_and_publish(&registry, &tokens).await {
        Ok(published) => Ok(published_page(&published)),
        Err(e @ Error::InvalidPlugin { .. }) => Ok(rejected_page(&e)),
        Err(e) => Ok(refused(e)),
    }
}

/// Refuses a post another site made: its `Origin` is not this host, or the
/// browser says it is cross-site.
fn same_origin(headers: &HeaderMap) -> Result<(), Error> {
    let cross = || Error::Forbidden("the upload form was posted from another site".into());
    if headers
        .get("sec-fetch-site")
        .is_some_and(|site| site.as_bytes() == b"cross-site")
    {
        return Err(cross());
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin_host = origin.to_str().ok().and_then(|o| {
        o.strip_prefix("http://")
            .or_else(|| o.strip_prefix("https://"))
    });
    match (origin_host, host) {
        (Some(o), Some(h)) if o.eq_ignore_ascii_case(h) => Ok(()),
        _ => Err(cross()),
    }
}

/// The upload form being read: its body under an allowance that grows only
/// once its token is accepted and an upload slot taken.
struct Form {
    multipart: Multipart,
    allowance: Arc<Allowance>,
    /// The token's account, once accepted.
    account: Option<Account>,
}

impl Form {
    /// Reads the form (the token before the component, so nothing large is
    /// read for a stranger) and publishes.
    async fn read_and_publish(
        &mut self,
        registry: &Registry,
        tokens: &Tokens,
    ) -> Result<Published, Error> {
        let mut signature: Option<String> = None;
        // The upload slot, taken as soon as the token is accepted.
        let mut slot: Option<UploadSlot> = None;
        let mut component: Option<axum::body::Bytes> = None;
        loop {
            if self.account.is_some() {
                // A part's headers (and the boundary before them) are small.
                self.allowance.allow_more(MAX_FORM_HEAD_BYTES);
            }
            let next = self.allowance.bounded(self.multipart.next_field()).await;
            let Some(field) = next
                .ok_or_else(|| head_too_large(&self.account))?
                .map_err(field_error)?
            else {
                break;
            };
            let name = field.name().unwrap_or_default().to_string();
            match name.as_str() {
                "token" if self.account.is_none() => {
                    let token = self
                        .allowance
                        .bounded(read_text(field, "token", MAX_TOKEN_BYTES))
                        .await
                        .ok_or_else(|| head_too_large(&self.account))??;
                    let token = token.trim();
                    if token.is_empty() {
                        return Err(no_token());
                    }
                    let account = tokens.account(token).await?;
                    slot = Some(registry.upload_slot(&account)?);
                    self.account = Some(account);
                }
                "signature" if signature.is_none() => {
                    let text = self
                        .allowance
                        .bounded(read_text(field, "signature", MAX_SIGNATURE_BYTES))
                        .await
                        .ok_or_else(|| head_too_large(&self.account))??;
                    signature = Some(text);
                }
                "component" if component.is_none() => {
                    if self.account.is_none() {
                        return Err(no_token());
                    }
                    self.allowance
                        .allow_more(sandwit_contract::MAX_COMPONENT_BYTES + MAX_FORM_HEAD_BYTES);
                    // The allowance has room for the largest component: a
                    // larger one is refused by its cap, not left waiting.
                    let read = self.allowance.bounded(read_component(field)).await;
                    component =
                        Some(read.ok_or(Error::TooLarge(sandwit_contract::MAX_COMPONENT_BYTES))??);
                }
                _ => {
                    return Err(Error::bad_request(
                        "invalid-form",
                        format!(
                            "the form has an unexpected or repeated field {}",
                            crate::names::quote(&name)
                        ),
                    ));
                }
            }
        }
        let (Some(account), Some(slot)) = (self.account.take(), slot) else {
            return Err(no_token());
        };
        let component = component.filter(|c| !c.is_empty()).ok_or_else(|| {
            Error::bad_request(
                "invalid-form",
                "choose the component file (.wasm) to upload",
            )
        })?;
        let signature = signature
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        registry
            .publish(&account, component, signature.as_deref(), slot)
            .await
    }
}

fn no_token() -> Error {
    Error::Unauthorized(
        "the form's API token field is empty (it must come before the component)".into(),
    )
}

/// The refusal of a form that sent more than [`MAX_FORM_HEAD_BYTES`]
/// before its token was accepted, or in one part's headers after.
fn head_too_large(account: &Option<Account>) -> Error {
    Error::FormTooLarge(if account.is_none() {
        format!(
            "the form sent more than {MAX_FORM_HEAD_BYTES} bytes before its API token field was \
             read (the token field comes first; the preamble, part headers and token are \
             capped), so nothing more is read"
        )
    } else {
        format!("a part's headers in the form are longer than {MAX_FORM_HEAD_BYTES} bytes")
    })
}

/// A form that could not be read.
fn field_error(e: MultipartError) -> Error {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        Error::TooLarge(sandwit_contract::MAX_COMPONENT_BYTES)
    } else {
        Error::bad_request("invalid-form", e.body_text())
    }
}

/// A text field of at most `max` bytes.
async fn read_text(mut field: Field<'_>, name: &str, max: usize) -> Result<String, Error> {
    let mut bytes = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(field_error)? {
        if bytes.len() + chunk.len() > max {
            return Err(Error::bad_request(
                "invalid-form",
                format!("the form's {name} field is longer than {max} bytes"),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    String::from_utf8(bytes).map_err(|_| {
        Error::bad_request(
            "invalid-form",
            format!("the form's {name} field is not UTF-8 text"),
        )
    })
}

/// The component field, at most the host's component size cap.
async fn read_component(mut field: Field<'_>) -> Result<axum::body::Bytes, Error> {
    let max = sandwit_contract::MAX_COMPONENT_BYTES;
    let mut bytes = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(field_error)? {
        if bytes.len() + chunk.len() > max {
            return Err(Error::TooLarge(max));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes.into())
}

fn published_page(p: &Published) -> Page {
    let href = plugin_path(&p.id, Some(&p.version));
    Page {
        status: StatusCode::CREATED,
        title: format!("Published {} {}", p.id, p.version),
        main: format!(
            "<h1>Published</h1>\n<p class=\"success\" role=\"status\">\
             <a href=\"{}\">{} {}</a> is published.</p>\n<dl class=\"facts\">\n\
             <dt>Digest</dt><dd><code class=\"digest\">{}</code></dd>\n\
             <dt>Size</dt><dd>{} bytes</dd>\n\
             <dt>Signed by</dt><dd><code class=\"key\">{}</code></dd>\n</dl>\n\
             <p><a href=\"/upload\">Upload another</a></p>\n",
            Esc(&href),
            Esc(&p.id),
            Esc(&p.version),
            Esc(&p.digest),
            p.size,
            Esc(&p.signer),
        ),
        retry_after: None,
    }
}

/// A plugin the load check refused: every problem of its report.
fn rejected_page(e: &Error) -> Page {
    let Error::InvalidPlugin { report, .. } = e else {
        return super::error::error_page(e, again());
    };
    let problems: Vec<&str> = report["problems"]
        .as_array()
        .map(|ps| ps.iter().filter_map(|p| p.as_str()).collect())
        .unwrap_or_default();
    let mut main = format!(
        "<h1>Upload refused</h1>\n<section class=\"report\" role=\"alert\" \
         aria-labelledby=\"report\">\n<h2 id=\"report\">The plugin failed the load check</h2>\n\
         <p>Component <code class=\"digest\">{}</code>: {} problem{}.</p>\n<ul class=\"problems\">\n",
        Esc(report["file"].as_str().unwrap_or_default()),
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for problem in &problems {
        let _ = writeln!(main, "<li>{}</li>", Esc(problem));
    }
    main.push_str("</ul>\n</section>\n");
    main.push_str(&again());
    Page {
        status: e.status(),
        title: "Upload refused".into(),
        main,
        retry_after: None,
    }
}
