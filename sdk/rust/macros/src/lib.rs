//! Attribute macros that turn a plain, documented Rust function into a sandwit
//! method: `#[tool]`, `#[agent]`, `#[behavior]` and `#[multimodal_agent]`.
//! Use them through `sandwit_sdk`, which re-exports them.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::quote;
use syn::{Expr, FnArg, ItemFn, Lit, Meta, Pat, Type, parse_macro_input};

/// Marks a function as a tool: its return value goes back to the calling code.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    method(attr, item, "Tool")
}

/// Marks a function as an agent method: the string it returns goes to the AI
/// and the script stops.
#[proc_macro_attribute]
pub fn agent(attr: TokenStream, item: TokenStream) -> TokenStream {
    method(attr, item, "Agent")
}

/// Marks a function as a behavior: the string it returns goes back to the code
/// and is recorded as a system message.
#[proc_macro_attribute]
pub fn behavior(attr: TokenStream, item: TokenStream) -> TokenStream {
    method(attr, item, "Behavior")
}

/// Marks a function as a multimodal agent method: the content parts it
/// returns go to the AI and the script stops.
#[proc_macro_attribute]
pub fn multimodal_agent(attr: TokenStream, item: TokenStream) -> TokenStream {
    method(attr, item, "MultimodalAgent")
}

fn method(attr: TokenStream, item: TokenStream, kind: &str) -> TokenStream {
    if !attr.is_empty() {
        return syn::Error::new(Span::call_site(), "this attribute takes no arguments")
            .to_compile_error()
            .into();
    }
    let func = parse_macro_input!(item as ItemFn);
    match expand(&func, kind) {
        Ok(extra) => quote!(#func #extra).into(),
        Err(e) => {
            let e = e.to_compile_error();
            quote!(#func #e).into()
        }
    }
}

fn expand(func: &ItemFn, kind: &str) -> syn::Result<TokenStream2> {
    let name = &func.sig.ident;
    let vis = &func.vis;
    let doc = doc_comment(func);
    if doc.is_empty() {
        return Err(syn::Error::new_spanned(
            &func.sig.ident,
            "a sandwit method needs a doc comment: it is the docstring the AI reads",
        ));
    }
    let description = doc
        .split("\n\n")
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if func.sig.asyncness.is_some() || !func.sig.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &func.sig,
            "a sandwit method is a plain (not async, not generic) function",
        ));
    }

    let mut call_args = Vec::new();
    let mut params = Vec::new();
    let mut decode = Vec::new();
    for (i, input) in func.sig.inputs.iter().enumerate() {
        let FnArg::Typed(arg) = input else {
            return Err(syn::Error::new_spanned(
                input,
                "a sandwit method takes no `self`",
            ));
        };
        if i == 0 && is_ctx(&arg.ty) {
            call_args.push(quote!(ctx));
            continue;
        }
        let Pat::Ident(pat) = &*arg.pat else {
            return Err(syn::Error::new_spanned(
                &arg.pat,
                "parameters must be plain names: they are the names the AI passes",
            ));
        };
        let ident = &pat.ident;
        let pname = ident.to_string();
        let ty = &arg.ty;
        params.push(quote! {
            ::sandwit_sdk::__private::param::<#ty>(#pname)
        });
        decode.push(quote! {
            let #ident: #ty = args.take(#pname)?;
        });
        call_args.push(quote!(#ident));
    }
    let ret = match &func.sig.output {
        syn::ReturnType::Default => quote!(()),
        syn::ReturnType::Type(_, ty) => quote!(#ty),
    };
    let kind_ty = syn::Ident::new(kind, Span::call_site());
    Ok(quote! {
        #[doc = concat!("The sandwit method spec of [`", stringify!(#name), "`].")]
        #[allow(non_camel_case_types)]
        #vis struct #name {}

        impl ::sandwit_sdk::__private::Method for #name {
            const NAME: &'static str = stringify!(#name);

            fn spec() -> ::sandwit_sdk::__private::MethodSpec {
                ::sandwit_sdk::__private::spec::<::sandwit_sdk::__private::#kind_ty, #ret>(
                    stringify!(#name),
                    #description,
                    #doc,
                    ::std::vec![#(#params),*],
                )
            }

            fn call(
                ctx: &::sandwit_sdk::AgentCtx,
                mut args: ::sandwit_sdk::__private::Args,
            ) -> ::std::result::Result<::sandwit_sdk::__private::MethodResult, ::sandwit_sdk::Error> {
                let _ = &ctx;
                #(#decode)*
                args.finish()?;
                ::sandwit_sdk::__private::Output::<::sandwit_sdk::__private::#kind_ty>::into_result(
                    #name(#(#call_args),*),
                )
            }
        }
    })
}

/// Whether a parameter's type is `&AgentCtx` (or `AgentCtx` by path).
fn is_ctx(ty: &Type) -> bool {
    let ty = match ty {
        Type::Reference(r) => &*r.elem,
        other => other,
    };
    matches!(ty, Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "AgentCtx"))
}

/// The function's doc comment, with the one space after `///` removed and
/// common indentation kept.
fn doc_comment(func: &ItemFn) -> String {
    let mut lines = Vec::new();
    for attr in &func.attrs {
        if let Meta::NameValue(nv) = &attr.meta
            && nv.path.is_ident("doc")
            && let Expr::Lit(lit) = &nv.value
            && let Lit::Str(s) = &lit.lit
        {
            let text = s.value();
            for line in text.split('\n') {
                lines.push(
                    line.strip_prefix(' ')
                        .unwrap_or(line)
                        .trim_end()
                        .to_string(),
                );
            }
        }
    }
    lines.join("\n").trim().to_string()
}
