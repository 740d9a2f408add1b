function x = as_double(x)
%AS_DOUBLE  Numeric and logical arrays as double (what the MEX file takes); anything else as is.
if isnumeric(x) || islogical(x)
  x = double(x);
end
end
